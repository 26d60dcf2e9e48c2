/*
 * mpicheck: a 2-rank MPI program that checks its data, for the libfabric
 * provider's Open MPI test (tests/provider_mpi_test.go). Rank 0 sends
 * messages of 1 B to 1 MiB to rank 1, which adds 1 to every byte and sends
 * them back; rank 0 checks every byte. Then an MPI_Allreduce of the ranks
 * plus one, checked against n(n+1)/2. Each rank prints "rank R: ok" or
 * what went wrong, and exits 0 only if everything held.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static unsigned char pattern(size_t i, int iter, size_t n) { return (unsigned char)(i * 7 + iter + n); }

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size, bad = 0;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	for (size_t n = 1; n <= (1u << 20) && !bad; n *= 4) {
		unsigned char *b = malloc(n);
		if (!b)
			MPI_Abort(MPI_COMM_WORLD, 2);
		for (int it = 0; it < 10 && !bad; it++) {
			if (rank == 0) {
				for (size_t i = 0; i < n; i++)
					b[i] = pattern(i, it, n);
				MPI_Send(b, (int)n, MPI_BYTE, 1, it, MPI_COMM_WORLD);
				MPI_Recv(b, (int)n, MPI_BYTE, 1, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				for (size_t i = 0; i < n; i++)
					if (b[i] != (unsigned char)(pattern(i, it, n) + 1)) {
						printf("rank 0: %zu-byte message %d: byte %zu is %u, want %u\n", n, it, i,
						       b[i], (unsigned char)(pattern(i, it, n) + 1));
						bad = 1;
						break;
					}
			} else if (rank == 1) {
				MPI_Recv(b, (int)n, MPI_BYTE, 0, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				for (size_t i = 0; i < n; i++)
					b[i]++;
				MPI_Send(b, (int)n, MPI_BYTE, 0, it, MPI_COMM_WORLD);
			}
		}
		free(b);
		MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
	}
	long v = rank + 1, sum = 0;
	MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (sum != (long)size * (size + 1) / 2) {
		printf("rank %d: allreduce gave %ld, want %ld\n", rank, sum, (long)size * (size + 1) / 2);
		bad = 1;
	}
	if (!bad)
		printf("rank %d: ok (allreduce %ld)\n", rank, sum);
	MPI_Finalize();
	return bad;
}
