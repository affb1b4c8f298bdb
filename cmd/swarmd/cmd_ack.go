package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/verbs"
)

// AckOptions are the inputs of `swarm ack`.
type AckOptions struct {
	App *App
	Ref string // a msg_id, or a message number (12, #12)
	All bool
}

func newAckCmd(app *App, runF func(*AckOptions) error) *cobra.Command {
	opts := &AckOptions{App: app}
	cmd := &cobra.Command{
		Use:   "ack <msg_id|#id> | ack --all",
		Short: "Acknowledge a protocol message that asks for an ACK",
		Long: `Acknowledge a protocol message (a task_dispatch, a review_request, a
ping) addressed to you: you have seen it and take it on. The ACK is a
protocol message of type ack back to its sender; the message's ACK state
becomes acked. With --all, every message that awaits your ACK and has been
delivered to you is acknowledged.

You are $SWARM_AGENT (else operator). An agent's ACK is taken only from its
current session: $SWARM_SESSION_ID must be its latest session, so a process
left over from an earlier session is refused (exit 1). The deadline runs
from the message's first delivery; past it the supervisor has escalated,
but a late ACK is still taken.

It prints one line per ACK; --json prints the stored ACKs, each with its
envelope under "protocol".`,
		Example: `  swarm ack task_dispatch-T-42-1763900000123
  swarm ack '#12'
  swarm ack --all`,
		Args: func(cmd *cobra.Command, args []string) error {
			if opts.All {
				return cobra.NoArgs(cmd, args)
			}
			if len(args) != 1 {
				return fmt.Errorf("give the msg_id (or #number) of the message to acknowledge, or --all")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Ref = args[0]
			}
			if runF != nil {
				return runF(opts)
			}
			return runAck(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.All, "all", false, "acknowledge every message that awaits your ACK")
	return cmd
}

func runAck(ctx context.Context, opts *AckOptions) error {
	app := opts.App
	if !opts.All && strings.TrimSpace(opts.Ref) == "" {
		return usagef("give the msg_id (or #number) of the message to acknowledge, or --all")
	}
	l, cfg, st, who, err := app.openCaller(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	agent := who.Name()
	p := app.protocol(st, l, cfg)
	var acks []message.Message
	if opts.All {
		acks, err = verbs.AckAll(ctx, who, p)
	} else {
		var a message.Message
		a, err = verbs.Ack(ctx, who, p, opts.Ref)
		acks = []message.Message{a}
	}
	if err != nil {
		return protocolRefusal(app.Stderr, err)
	}
	if app.JSON {
		return app.printJSON(withEnvelopes(acks))
	}
	if len(acks) == 0 {
		fmt.Fprintf(app.Stdout, "no message awaits %s's ACK\n", agent)
		return nil
	}
	for _, a := range acks {
		env := withEnvelope(a).Protocol
		of := ""
		if env != nil {
			of = ackOf(env.Payload)
		}
		fmt.Fprintf(app.Stdout, "acknowledged %s (sent %s to %s)\n", of, a.MsgID, a.To)
	}
	return nil
}
