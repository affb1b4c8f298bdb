package main

import (
	"io"
	"runtime"

	"github.com/swarmhq/swarm/internal/front"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func versionString() string { return front.Version(version) }

func newVersionCmd(app *App) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print swarm's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if app.JSON {
				return app.printJSON(map[string]string{"version": versionString(), "go": runtime.Version()})
			}
			_, err := io.WriteString(app.Stdout, front.VersionLine(version))
			return err
		},
	}
}
