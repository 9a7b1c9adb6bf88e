package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
)

func (a *app) logsCmd() *cobra.Command {
	var (
		follow bool
		since  string
		tail   int
	)
	cmd := &cobra.Command{
		Use:   "logs POD | job/NAME",
		Short: "Print the journal of a pod or job, read on the board it runs on",
		Long: `Print the journal of a pod's systemd unit (herd-POD.service), read with
journalctl on the board the pod runs on. For job/NAME, the journal of the
job's current pod, or of the pod of its newest run; a job with concurrency
allow runs each run as an instance herd-POD@ID.service, and its journal is
that of all of them (with -f: the output of every run, including those that
start meanwhile).

--since takes a duration (10m, 1h30m: that long ago) or a time
(2025-06-01T10:00:00+02:00, or "2025-06-01 10:00:00" in local time).
--tail N shows only the last N lines; --tail 0 shows none, which with -f
means only new lines.

With -f, new lines are printed as they come until interrupted (Ctrl-C ends
it normally) or --timeout passes. Without -f, --timeout defaults to 30s.`,
		Example: `  herdctl logs web-7x2kq
  herdctl logs web-7x2kq -f --tail 20
  herdctl logs pod/web-7x2kq --since 10m
  herdctl logs job/backup --tail 50`,
		Args: argsBetween(1, 1),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return a.completeNames(cmd, api.KindPod, nil), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name, job, err := podArg(args[0])
			if err != nil {
				return err
			}
			opts := client.LogOptions{Follow: follow}
			if since != "" {
				_, at, isTime, err := api.ParseSince(since, time.Local)
				if err != nil {
					return usagef("--%v", err)
				}
				opts.Since = strings.TrimSpace(since)
				if isTime {
					// The agent reads a time without a zone as UTC: send
					// what the user meant, their local time.
					opts.Since = at.Format(time.RFC3339)
				}
			}
			switch {
			case tail > api.MaxLogTail:
				return usagef("--tail %d: at most %d lines", tail, api.MaxLogTail)
			case tail == 0:
				opts.Since = "0s" // no past lines
			case tail > 0:
				opts.Tail = tail
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.streamContext(cmd, follow)
			defer cancel()
			if job {
				if name, err = jobPod(ctx, c, name); err != nil {
					return err
				}
			}
			err = c.Logs(ctx, name, opts, a.stdout)
			if follow && ctx.Err() != nil {
				return nil // Ctrl-C or --timeout: the end of a follow
			}
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&follow, "follow", "f", false, "keep printing new lines as they come")
	f.StringVar(&since, "since", "", "only lines since a duration ago (10m) or a time (RFC 3339, or \"2006-01-02 15:04:05\" local)")
	f.IntVar(&tail, "tail", -1, "only the last N lines; -1 for all")
	return cmd
}

// podArg parses the POD argument of logs: NAME, pod/NAME or job/NAME
// (job reports the last).
func podArg(s string) (name string, job bool, err error) {
	k, n, ok := strings.Cut(s, "/")
	if !ok {
		return s, false, nil
	}
	kind, err := parseKind(k)
	if err != nil {
		return "", false, err
	}
	if kind != api.KindPod && kind != api.KindJob {
		return "", false, usagef("logs: %q: only pods and jobs have logs (list a %s's pods with herdctl describe %s %s)", s, singular(kind), singular(kind), n)
	}
	if n == "" {
		return "", false, usagef("logs: %q: want POD, pod/NAME or job/NAME", s)
	}
	return n, kind == api.KindJob, nil
}

// jobPod returns the pod whose journal `logs job/NAME` reads: the job's
// current pod, else the pod of its newest run (a finished job keeps it).
func jobPod(ctx context.Context, c apiClient, name string) (string, error) {
	raw, err := c.Get(ctx, api.KindJob, name)
	if err != nil {
		return "", err
	}
	raw.Kind = api.KindJob
	o, err := api.FromRaw(raw)
	if err != nil {
		return "", err
	}
	st := o.(*api.Job).Status
	if st.Pod != "" {
		return st.Pod, nil
	}
	if len(st.Runs) > 0 {
		return st.Runs[0].Pod, nil
	}
	return "", fmt.Errorf("job %s has no pod and no run yet (status %s)", name, orNone(string(st.Phase)))
}
