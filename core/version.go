package core

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// version is fabricfs's version, set at link time by the scripts that
// build the daemon (scripts/run.sh: -ldflags "-X
// github.com/fabricfs/fabricfs/core.version=$(git describe --always
// --dirty)"); when empty, the module version in the build info.
var version string

// Versions are the facts `fabricfs -version` prints and /version shows.
type Versions struct {
	Version    string `json:"version"`     // fabricfs's: git describe, a module version, or "devel"
	ABIVersion int    `json:"abi_version"` // the tree's and rings' layout, as /abi_version
	GoVersion  string `json:"go_version"`  // the Go release that built the daemon
	APIVersion string `json:"api_version"` // the libfabric API the tree implements, "1.17"
}

// DaemonVersions are this binary's Versions.
func DaemonVersions() Versions {
	v := version
	if bi, ok := debug.ReadBuildInfo(); v == "" && ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	if v == "" {
		v = "devel"
	}
	return Versions{Version: v, ABIVersion: ring.Version, GoVersion: runtime.Version(), APIVersion: fi.APIVersion.String()}
}

// String is one line per fact, `KEY VALUE`, the keys those of the JSON
// form.
func (v Versions) String() string {
	return fmt.Sprintf("version %s\nabi_version %d\ngo_version %s\napi_version %s\n", v.Version, v.ABIVersion, v.GoVersion, v.APIVersion)
}
