package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax/admin"
)

// taskAction is `ax tasks cancel|retry|trigger|reschedule ID`, or, without an ID,
// the bulk form of cancel, retry and trigger (taskBulk).
func taskAction(ctx context.Context, action string, args []string, stdout, stderr io.Writer) int {
	if action != "reschedule" && len(args) > 0 && strings.HasPrefix(args[0], "-") && !isHelp(args[0]) {
		return taskBulk(ctx, action, args, stdout, stderr)
	}
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
		if at == nil && len(args) > 0 && isHelp(args[0]) { // and the bulk form's
			fmt.Fprintln(stdout)
			return taskBulk(ctx, action, args[:1], stdout, stderr)
		}
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
	return namedAction(ctx, "schedules", action, "schedule name", "why, recorded in the audit log (`TEXT`; required to trigger)", "", args, stdout, stderr)
}

// nameAction is `ax names pause|resume NAME`.
func nameAction(ctx context.Context, action string, args []string, stdout, stderr io.Writer) int {
	return namedAction(ctx, "names", action, "task name", "why, recorded in the audit log (`TEXT`)", " and prints the name's state after it", args, stdout, stderr)
}

// nameLimit is `ax names limit NAME [--concurrency N] [--rate N --per D]
// [--key-concurrency N] [--key-rate N --key-per D]`: POST /names/NAME/concurrency,
// /rate, /key-concurrency and /key-rate, for the limits given.
func nameLimit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const command = "names limit"
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	var api apiFlags
	api.register(fs)
	reason := fs.String("reason", "", "why, recorded in the audit log (`TEXT`)")
	// Strings, so that a limit not given is told from a 0 given (which removes it).
	concText := fs.String("concurrency", "", "at most `N` tasks of the name DISPATCHING or RUNNING at once, on every replica; 0 removes the limit")
	rateText := fs.String("rate", "", "at most `N` tasks of the name started in any window of --per, on every replica; 0 removes the limit")
	per := fs.Duration("per", 0, "the rate's window (`D`, e.g. 1s, 1m)")
	keysText := fs.String("key-concurrency", "", "at most `N` tasks of the name sharing a task key run at once; 0 or 1: one")
	keyRateText := fs.String("key-rate", "", "at most `N` tasks of the name sharing a task key started in any window of --key-per, for each key; 0 removes the limit")
	keyPer := fs.Duration("key-per", 0, "the rate per key's window (`D`, e.g. 1s, 1m)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: ax %s NAME [--concurrency N] [--rate N --per D] [--key-concurrency N] [--key-rate N --key-per D] [flags]\n\nCalls POST /names/NAME/concurrency, /rate, /key-concurrency and /key-rate for the limits given, and prints the name's state after each.\n\nflags:\n", command)
		fs.PrintDefaults()
	}
	name, code, ok := firstArg(fs, command, "task name", args, stdout, stderr)
	if !ok {
		return code
	}
	n, rate, keys, keyRate := -1, -1, -1, -1 // not given
	for _, f := range []struct {
		flag, text string
		into       *int
	}{{"concurrency", *concText, &n}, {"rate", *rateText, &rate}, {"key-concurrency", *keysText, &keys}, {"key-rate", *keyRateText, &keyRate}} {
		if f.text == "" {
			continue
		}
		v, err := strconv.Atoi(f.text)
		if err != nil || v < 0 {
			fmt.Fprintf(stderr, "ax %s: --%s %q: want a whole number, 0 or more\n\n", command, f.flag, f.text)
			fs.Usage()
			return exitUsage
		}
		*f.into = v
	}
	if n < 0 && rate < 0 && keys < 0 && keyRate < 0 {
		fmt.Fprintf(stderr, "ax %s: give --concurrency, --rate with --per, --key-concurrency, --key-rate with --key-per, or several\n\n", command)
		fs.Usage()
		return exitUsage
	}
	if rate > 0 && *per <= 0 {
		fmt.Fprintf(stderr, "ax %s: --rate needs --per, a positive duration\n\n", command)
		fs.Usage()
		return exitUsage
	}
	if keyRate > 0 && *keyPer <= 0 {
		fmt.Fprintf(stderr, "ax %s: --key-rate needs --key-per, a positive duration\n\n", command)
		fs.Usage()
		return exitUsage
	}
	path := "/names/" + url.PathEscape(name)
	if n >= 0 {
		if code := api.act(ctx, command, path+"/concurrency", admin.ActionBody{Reason: *reason, Concurrency: &n}, stdout, stderr); code != exitOK {
			return code
		}
	}
	if rate >= 0 {
		if code := api.act(ctx, command, path+"/rate", admin.ActionBody{Reason: *reason, Rate: &rate, Per: per.String()}, stdout, stderr); code != exitOK {
			return code
		}
	}
	if keys >= 0 {
		if code := api.act(ctx, command, path+"/key-concurrency", admin.ActionBody{Reason: *reason, KeyConcurrency: &keys}, stdout, stderr); code != exitOK {
			return code
		}
	}
	if keyRate >= 0 {
		return api.act(ctx, command, path+"/key-rate", admin.ActionBody{Reason: *reason, Rate: &keyRate, Per: keyPer.String()}, stdout, stderr)
	}
	return exitOK
}

// namedAction is `ax RESOURCE ACTION NAME [--reason R]`: POST /RESOURCE/NAME/ACTION
// through the admin API. what names the operand in errors; reasonHelp is the flag's
// help, and usageMore ends the usage's sentence.
func namedAction(ctx context.Context, resource, action, what, reasonHelp, usageMore string, args []string, stdout, stderr io.Writer) int {
	command := resource + " " + action
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	var api apiFlags
	api.register(fs)
	reason := fs.String("reason", "", reasonHelp)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: ax %s NAME [flags]\n\nCalls POST /%s/NAME/%s%s.\n\nflags:\n", command, resource, action, usageMore)
		fs.PrintDefaults()
	}
	name, code, ok := firstArg(fs, command, what, args, stdout, stderr)
	if !ok {
		return code
	}
	return api.act(ctx, command, "/"+resource+"/"+url.PathEscape(name)+"/"+action, admin.ActionBody{Reason: *reason}, stdout, stderr)
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
		} else if res.Audit.Action == "task.trigger" && t.Status == "SCHEDULED" {
			// The server runs no handler of the task (ax serve): it handed the task
			// over, due now, rather than running it.
			fmt.Fprintf(tw, "handed over:\tdue now; a scheduler that runs %s starts it\n", t.Name)
		}
	} else {
		fmt.Fprintf(tw, "target:\t%s\n", res.Audit.Target)
	}
	if n := res.Name; n != nil {
		fmt.Fprintf(tw, "state:\t%s\n", nameState(*n))
		fmt.Fprintf(tw, "concurrency:\t%s\n", limitText(n.Concurrency))
		fmt.Fprintf(tw, "per task key:\t%s\n", keysText(*n))
		fmt.Fprintf(tw, "rate:\t%s\n", rateText(*n))
	}
	fmt.Fprintf(tw, "audit:\t%d (%s by %s)\n", res.Audit.ID, res.Audit.Action, res.Audit.Actor)
	tw.Flush()
	return exitOK
}

// taskBulk is `ax tasks cancel|retry|trigger` on many tasks: by --ids, or by a filter
// of GET /tasks's parameters (--all for none), through POST /tasks/bulk/ACTION.
func taskBulk(ctx context.Context, action string, args []string, stdout, stderr io.Writer) int {
	command := "tasks " + action
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	api := apiFlags{timeout: 5 * time.Minute} // up to 10,000 tasks, each in a transaction of its own
	api.register(fs)
	reason := fs.String("reason", "", "why, recorded in the audit log (`TEXT`; required)")
	ids := fs.String("ids", "", "the tasks, by `ID,ID,…`")
	all := fs.Bool("all", false, "every task the action may change (no filter)")
	dryRun := fs.Bool("dry-run", false, "only print how many tasks would change")
	filter := registerFilter(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: ax %s --ids ID,ID,… --reason R [--dry-run] [flags]
       ax %s FILTER… --reason R [--dry-run] [flags]
       ax %s --all --reason R [--dry-run] [flags]

Calls POST /tasks/bulk/%s: the action on each task given, or on each the filter
selects among those in a state the action may change (the newest 10,000 at most),
and prints those it did not change and why; --dry-run prints how many would change.

flags:
`, command, command, command, action)
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		if fs.NArg() > 0 {
			fmt.Fprintf(stderr, "ax %s: the task ID comes first, before the flags: ax %s %s …\n", command, command, fs.Arg(0))
		}
		return code
	}
	body := admin.BulkBody{Reason: *reason, DryRun: *dryRun}
	q := filter.values()
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ax %s: "+format+"\n\n", append([]any{command}, a...)...)
		fs.Usage()
		return exitUsage
	}
	switch {
	case strings.TrimSpace(*reason) == "":
		return usageErr("--reason is required: it is recorded with each task changed")
	case *ids != "" && (len(q) > 0 || *all):
		return usageErr("give --ids or a filter (or --all), not both")
	case *ids != "":
		for _, s := range strings.Split(*ids, ",") {
			id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil {
				return usageErr("--ids: %q is not a task ID", s)
			}
			body.IDs = append(body.IDs, id)
		}
	case len(q) > 0 && *all:
		return usageErr("--all is every task: give it without a filter")
	case len(q) == 0 && !*all:
		return usageErr("which tasks? give --ids, a filter (--status, --name, …), or --all")
	default:
		filter := q.Encode()
		body.Filter = &filter
	}
	var res admin.BulkResult
	answer, err := api.do(ctx, "POST", "/tasks/bulk/"+action, nil, body, &res)
	if err != nil {
		fmt.Fprintf(stderr, "ax %s: %v\n", command, err)
		return exitFail
	}
	if api.json {
		stdout.Write(answer)
		return exitOK
	}
	if res.DryRun {
		more := ""
		if res.More {
			more = fmt.Sprintf(" (the filter selects more: the newest %d would be taken)", res.Selected)
		}
		fmt.Fprintf(stdout, "would %s %d of %d tasks selected%s\n", action, res.Changed, res.Selected, more)
		return exitOK
	}
	var unchanged []admin.BulkTask // the tasks changed are many and alike: only the others are listed
	for _, t := range res.Tasks {
		if t.Audit == 0 {
			unchanged = append(unchanged, t)
		}
	}
	if len(unchanged) > 0 {
		tw := newTable(stdout)
		fmt.Fprintln(tw, "NOT CHANGED\tSTATUS\tRESULT")
		for _, t := range unchanged {
			fmt.Fprintf(tw, "%d\t%s\t%s\n", t.ID, t.Status, t.Result)
		}
		tw.Flush()
	}
	fmt.Fprintf(stdout, "%s: %d of %d tasks changed (bulk %s)\n", action, res.Changed, res.Selected, res.Bulk)
	if res.More {
		fmt.Fprintf(stdout, "the filter selects more: the newest %d were taken; run it again for the rest\n", res.Selected)
	}
	if res.Stopped != "" {
		fmt.Fprintf(stdout, "stopped after %d: %s\n", len(res.Tasks), res.Stopped)
	}
	if res.Audit != nil {
		fmt.Fprintf(stdout, "audit: %d (%s by %s)\n", res.Audit.ID, res.Audit.Action, res.Audit.Actor)
	} else {
		fmt.Fprintf(stdout, "audit: %s\n", res.AuditFailed)
	}
	return exitOK
}
