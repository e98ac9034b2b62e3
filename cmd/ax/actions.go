package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/axsched/ax/admin"
)

// taskAction is `ax tasks cancel|retry|trigger|reschedule ID`.
func taskAction(ctx context.Context, action string, args []string, stdout, stderr io.Writer) int {
	command := "tasks " + action
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	var api apiFlags
	api.register(fs)
	reason := fs.String("reason", "", "why, recorded in the audit log (`TEXT`; required to trigger and to reschedule)")
	var at *string
	if action == "reschedule" {
		at = fs.String("at", "", "the new due `TIME`: RFC 3339, or a duration from now such as 10m")
	}
	fs.Usage = func() {
		extra := ""
		if at != nil {
			extra = " --at T"
		}
		fmt.Fprintf(fs.Output(), "usage: ax %s ID%s [flags]\n\nCalls POST /tasks/ID/%s and prints the task after it.\n\nflags:\n", command, extra, action)
		fs.PrintDefaults()
	}
	id, code, ok := firstArg(fs, command, "task ID", args, stdout, stderr)
	if !ok {
		return code
	}
	body := admin.ActionBody{Reason: *reason}
	if at != nil {
		t, err := parseAt(*at, time.Now())
		if err != nil {
			fmt.Fprintf(stderr, "ax %s: --at: %v\n\n", command, err)
			fs.Usage()
			return exitUsage
		}
		body.At = &t
	}
	return api.act(ctx, command, "/tasks/"+url.PathEscape(id)+"/"+action, body, stdout, stderr)
}

// scheduleAction is `ax schedules pause|resume|trigger NAME`.
func scheduleAction(ctx context.Context, action string, args []string, stdout, stderr io.Writer) int {
	command := "schedules " + action
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	var api apiFlags
	api.register(fs)
	reason := fs.String("reason", "", "why, recorded in the audit log (`TEXT`; required to trigger)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: ax %s NAME [flags]\n\nCalls POST /schedules/NAME/%s.\n\nflags:\n", command, action)
		fs.PrintDefaults()
	}
	name, code, ok := firstArg(fs, command, "schedule name", args, stdout, stderr)
	if !ok {
		return code
	}
	return api.act(ctx, command, "/schedules/"+url.PathEscape(name)+"/"+action, admin.ActionBody{Reason: *reason}, stdout, stderr)
}

// firstArg reads the command's operand, which comes first, then its flags.
func firstArg(fs *flag.FlagSet, command, what string, args []string, stdout, stderr io.Writer) (string, int, bool) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && isHelp(args[0]) {
			code, _ := parseFlags(fs, args[:1], stdout, stderr)
			return "", code, false
		}
		fmt.Fprintf(stderr, "ax %s: missing %s (it comes first, before the flags)\n\n", command, what)
		fs.Usage()
		return "", exitUsage, false
	}
	code, ok := parseFlags(fs, args[1:], stdout, stderr)
	return args[0], code, ok
}

// parseAt reads an RFC 3339 time, or a duration from now.
func parseAt(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, fmt.Errorf("missing: give an RFC 3339 time or a duration such as 10m")
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(strings.TrimPrefix(s, "+"))
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a duration", s)
	}
	return now.Add(d), nil
}

// act is a mutating command's whole answer: POST path with body, then the server's
// JSON (--json) or a line about the task and the audit record.
func (a *apiFlags) act(ctx context.Context, command, path string, body admin.ActionBody, stdout, stderr io.Writer) int {
	var res admin.ActionResult
	answer, err := a.do(ctx, "POST", path, nil, body, &res)
	if err != nil {
		fmt.Fprintf(stderr, "ax %s: %v\n", command, err)
		return exitFail
	}
	if a.json {
		stdout.Write(answer)
		return exitOK
	}
	tw := newTable(stdout)
	if t := res.Task; t != nil {
		fmt.Fprintf(tw, "task:\t%d %s/%s\n", t.ID, t.Name, t.Key)
		fmt.Fprintf(tw, "status:\t%s\n", t.Status)
		fmt.Fprintf(tw, "due:\t%s\n", t.DueAt.Format(time.RFC3339Nano))
		if res.Audit.ExecutionID != "" {
			fmt.Fprintf(tw, "execution:\t%s\n", res.Audit.ExecutionID)
		}
	} else {
		fmt.Fprintf(tw, "target:\t%s\n", res.Audit.Target)
	}
	fmt.Fprintf(tw, "audit:\t%d (%s by %s)\n", res.Audit.ID, res.Audit.Action, res.Audit.Actor)
	tw.Flush()
	return exitOK
}
