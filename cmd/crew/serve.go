// crew serve: the live web dashboard (package web). The command is in
// both builds; it is served by the full one (serve_full.go), so that the
// lite build links no HTTP server.

package main

import (
	"github.com/urfave/cli/v2"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "serve a live web dashboard of the runs: boards, threads, timeline, events; respond, steer, cancel … from the page (leader)",
		UsageText: "crew serve                       # prints http://127.0.0.1:7777/?token=…; open it\n" +
			"crew serve --addr 127.0.0.1:0 --open\n" +
			"crew serve --addr 0.0.0.0:7777 --allow-remote   # other machines: anyone with the URL acts as leader",
		Flags: []cli.Flag{asFlag,
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:7777", Usage: "listen on `HOST:PORT` (port 0: any free port)"},
			&cli.BoolFlag{Name: "allow-remote", Usage: "allow an --addr that is not a loopback address (other machines can then reach the dashboard); prints a warning"},
			&cli.BoolFlag{Name: "open", Usage: "open the dashboard in the default browser"},
			quietAfterFlag, undeliveredAfterFlag,
		},
		Action: serve,
	}
}
