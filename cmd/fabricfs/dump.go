package main

import (
	"bytes"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

// dumpOnSignal makes SIGUSR1 write the stack of every goroutine of the
// daemon to its log, at warn level, and go on serving: what an operator
// (or a test that sees a request never answered) reads to find what the
// daemon is waiting for, without stopping it as SIGQUIT would.
func dumpOnSignal() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGUSR1)
	go func() {
		for range c {
			var b bytes.Buffer
			pprof.Lookup("goroutine").WriteTo(&b, 2)
			slog.Warn("SIGUSR1: the stacks of every goroutine follow\n" + b.String())
		}
	}()
}
