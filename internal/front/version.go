package front

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
)

// Version is the version a binary was built as: v, set with -ldflags
// "-X main.version=...", else the module's, else (devel).
func Version(v string) string {
	if v == "" {
		v = "(devel)"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
			v = bi.Main.Version
		}
	}
	return v
}

// VersionLine is what `swarm version` prints.
func VersionLine(v string) string {
	return fmt.Sprintf("swarm %s (%s %s/%s)\n", Version(v), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// IsVersion reports whether args are exactly `swarm version`, which the
// front prints itself (with flags, the whole program answers).
func IsVersion(args []string) bool { return slices.Equal(args, []string{"version"}) }
