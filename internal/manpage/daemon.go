package manpage

// daemonText is fabricfs(8) after its synopsis, in the Markdown roff
// reads; {{options}} is where the flags go.
const daemonText = `## Description

fabricfs mounts libfabric's object model at MOUNTPOINT as a file tree,
described in **fabricfs**(5): providers (tcp and verbs), their domains, and
in each domain the endpoints, queues, counters, address vectors and memory
regions that users make with mkdir and drive by writing and reading files.
libfabric programs use the tree through the fabricfs libfabric provider.

It serves in the foreground until SIGINT or SIGTERM. As root it mounts
directly, with allow_other so that every user can use the tree; as another
user it mounts through fusermount3. A stale fabricfs mount on MOUNTPOINT,
left by a daemon killed with SIGKILL, is detached first; a stale mount of
another file system is refused with the command that detaches it.

The tcp domains are the host's interfaces that are up and running with an
address, or those ` + "`-tcp-iface`" + ` names, and always lo; the verbs devices are one
software RDMA device per address (` + "`-verbs-addrs`" + `). Interfaces that come
up while the daemon runs become domains when the tree next looks (listing
a provider directory, reading info or getinfo); a domain is never removed.

## Options

{{options}}

Durations are Go durations: 300ms, 10s, 1m30s. The tcp settings are what
libfabric's tcp provider reads from FI_TCP_IFACE, FI_TCP_PORT_LOW_RANGE and
FI_TCP_PORT_HIGH_RANGE; the daemon reads no FI_ variable itself, and
` + "`/getinfo`" + `'s ` + "`-e`" + ` lists none. Unlike libfabric, ` + "`-tcp-iface`" + ` takes several names,
and one that names no interface yet still filters (libfabric would drop
it): the interface becomes a domain when it comes up.

## Configuration file

With ` + "`-config FILE`" + `, the daemon reads its settings from FILE before it
starts: one setting a line, ` + "`key = value`" + `, the key a flag's name without
its dash (` + "`tcp-iface = eth0`" + `, ` + "`tcp-keepalive = false`" + `); blank lines and lines
starting with # are ignored; every flag but ` + "`-config`" + ` and ` + "`-version`" + ` is a key.
Flags given on the command line override the file. An unknown key, a key
given twice, a line that is not ` + "`key = value`" + ` or a bad value stops the daemon
with an error that names FILE:LINE, and exit status 2.
deploy/fabricfs.conf lists every key at its default.

## Signals

- SIGTERM, SIGINT: unmount (lazily if files are still open: the kernel
  drops the mount once they close), close every object and exit with
  status 0. Under systemd the daemon first sends STOPPING=1.
- SIGUSR1: write the stack of every goroutine to the log (at warn level)
  and go on serving: what the daemon is waiting for, when a request
  seems never answered.
- SIGKILL leaves a stale mount, which answers ENOTCONN until it is
  detached; the next daemon on the same MOUNTPOINT detaches it.

## Environment

- NOTIFY_SOCKET: set by systemd for a Type=notify service. The daemon
  sends READY=1 once the tree is mounted and answers, and STOPPING=1 when a
  signal stops it (**sd_notify**(3)'s protocol).

## Files

- /dev/fuse: the FUSE device; mounting needs CAP_SYS_ADMIN, or
  fusermount3 for another user.
- /etc/fuse.conf: user_allow_other lets a daemon that is not root use
  ` + "`-allow-other`" + `.
- /etc/fabricfs.conf: the config file deploy/fabricfs.service passes with
  ` + "`-config`" + `.
- deploy/fabricfs.service: a systemd unit (Type=notify) that mounts the
  tree on /fabric.
- MOUNTPOINT/version: what ` + "`fabricfs -version`" + ` prints.

## Exit status

0 after a signal stopped the daemon, or after ` + "`-version`" + `; 2 for a bad flag, config
file or setting; 1 when the mount or a provider fails.

## See also

**fabricfs**(5), **fi_info**(1), **fabric**(7), **fusermount3**(1),
**systemd.service**(5), **sd_notify**(3); docs/deploy.md.
`
