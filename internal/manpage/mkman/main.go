// Command mkman writes the files package manpage generates (the manual
// pages and deploy/fabricfs.conf) into the repository whose root is its
// argument: go generate ./internal/manpage runs it.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/fabricfs/fabricfs/internal/manpage"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mkman REPOSITORY-ROOT")
		os.Exit(2)
	}
	files, err := manpage.Files(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkman:", err)
		os.Exit(1)
	}
	for name, b := range files {
		path := filepath.Join(os.Args[1], name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "mkman:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "mkman:", err)
			os.Exit(1)
		}
	}
}
