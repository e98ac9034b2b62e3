package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/axsched/ax/admin"
)

// The operators' commands talk to an admin API (package admin) over HTTP: the server
// is --server or AX_SERVER, the bearer token AX_TOKEN (or --token, which other users
// of the machine can read in the process list).

// apiFlags are the flags every API command takes.
type apiFlags struct {
	server, token string
	json          bool
	timeout       time.Duration // of a request; 0: 30 seconds
}

func (a *apiFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.server, "server", envOr("AX_SERVER", "http://127.0.0.1:8080"), "the admin API's base `URL` (env AX_SERVER)")
	// The default is read when the request is made, not here: a usage text would show it.
	fs.StringVar(&a.token, "token", "", "the bearer `TOKEN` (default: env AX_TOKEN; prefer it: a flag shows in the process list)")
	fs.BoolVar(&a.json, "json", false, "print the server's JSON instead of a table")
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// get calls GET path (with query) on the API and decodes its JSON into out, returning
// the raw body too; an error response is returned as an error carrying the server's
// code and message.
func (a *apiFlags) get(ctx context.Context, path string, query url.Values, out any) ([]byte, error) {
	return a.do(ctx, http.MethodGet, path, query, nil, out)
}

// do is get for any method, with body (nil for none) sent as JSON.
func (a *apiFlags) do(ctx context.Context, method, path string, query url.Values, body any, out any) ([]byte, error) {
	u := strings.TrimSuffix(a.server, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(a.timeout, 30*time.Second))
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token := cmp.Or(a.token, os.Getenv("AX_TOKEN")); token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Close = true // one request per command: keep no connection open
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(answer, &e) == nil && e.Error.Code != "" {
			return nil, fmt.Errorf("%s (%d): %s", e.Error.Code, resp.StatusCode, e.Error.Message)
		}
		return nil, fmt.Errorf("%s: %.200s", resp.Status, answer)
	}
	if err := json.Unmarshal(answer, out); err != nil {
		// A 200 that is no JSON is most often a page: --server names the console,
		// or another site, rather than the admin API.
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			return nil, fmt.Errorf("%s answered %s, not the admin API's JSON: is --server the admin API's base URL?", u, cmp.Or(ct, "no content type"))
		}
		return nil, err
	}
	return answer, nil
}

// show is a read command's whole answer: GET path into out, then the server's JSON
// (--json) or table, which writes out's table; the server's error is exit 1 under
// the command's name.
func (a *apiFlags) show(ctx context.Context, command, path string, query url.Values, out any, stdout, stderr io.Writer, table func(w io.Writer)) int {
	body, err := a.get(ctx, path, query, out)
	if err != nil {
		fmt.Fprintf(stderr, "ax %s: %v\n", command, err)
		return exitFail
	}
	if a.json {
		stdout.Write(body)
		return exitOK
	}
	table(stdout)
	return exitOK
}

// newTable is the aligned table every command prints.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// runTasks is `ax tasks list|show|cancel|retry|trigger|reschedule`.
func runTasks(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	usage := func(w io.Writer) {
		fmt.Fprint(w, `usage: ax tasks list [flags]                          a page of tasks, newest first
       ax tasks show ID [flags]                       one task and its executions
       ax tasks cancel ID [--reason R]                cancel a SCHEDULED task
       ax tasks retry ID [--reason R]                 retry a FAILED task
       ax tasks trigger ID --reason R                 run a task now
       ax tasks reschedule ID --at T --reason R       move a SCHEDULED task's due time
       ax tasks cancel|retry|trigger --ids ID,… | FILTER… | --all --reason R [--dry-run]
                                                      the same on many tasks at once

Run 'ax tasks ACTION -h' for the flags.
`)
	}
	const actions = "list, show, cancel, retry, trigger or reschedule"
	if len(args) == 0 {
		fmt.Fprintf(stderr, "ax tasks: missing action: want %s\n\n", actions)
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	case "list":
		return tasksList(ctx, args[1:], stdout, stderr)
	case "show":
		return tasksShow(ctx, args[1:], stdout, stderr)
	case "cancel", "retry", "trigger", "reschedule":
		return taskAction(ctx, args[0], args[1:], stdout, stderr)
	}
	if strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(stderr, "ax tasks: the action (%s) comes first, before the flags; got %q\n\n", actions, args[0])
	} else {
		fmt.Fprintf(stderr, "ax tasks: unknown action %q: want %s\n\n", args[0], actions)
	}
	usage(stderr)
	return exitUsage
}

// taskFilter is the flags that select tasks, as GET /tasks's parameters do: of
// `ax tasks list` and of the bulk actions.
type taskFilter struct {
	statuses repeated
	params   map[string]*string // by query parameter
}

func registerFilter(fs *flag.FlagSet) *taskFilter {
	f := &taskFilter{params: map[string]*string{}}
	fs.Var(&f.statuses, "status", "only tasks in `STATUS` (repeat, or comma-separate, for several)")
	for _, p := range []struct{ flag, param, usage string }{
		{"name", "name", "only tasks of handler `NAME`"},
		{"key-prefix", "key_prefix", "only keys that start with `P`"},
		{"owner", "owner", "only tasks submitted by `SERVICE`"},
		{"task-key", "task_key", "only tasks of task key `K`"},
		{"due-from", "due_from", "only tasks due at or after `T` (RFC 3339)"},
		{"due-before", "due_before", "only tasks due before `T`"},
		{"finished-from", "finished_from", "only tasks finished at or after `T`"},
		{"finished-before", "finished_before", "only tasks finished before `T`"},
	} {
		f.params[p.param] = fs.String(p.flag, "", p.usage)
	}
	return f
}

// values is the filter as GET /tasks's query parameters.
func (f *taskFilter) values() url.Values {
	q := url.Values{}
	for _, st := range f.statuses {
		q.Add("status", st)
	}
	for param, v := range f.params {
		if *v != "" {
			q.Set(param, *v)
		}
	}
	return q
}

// repeated is a flag that may be given several times.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func tasksList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tasks list", flag.ContinueOnError)
	var api apiFlags
	api.register(fs)
	filter := registerFilter(fs)
	order := fs.String("order", "newest", "`newest` or soonest (by due time)")
	limit := fs.Int("limit", 0, "page size `N` (default 100, at most 1000)")
	cursor := fs.String("cursor", "", "continue after a page: its `NEXT`")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: ax tasks list [flags]\n\nPrints a page of tasks and, when there are more, the cursor of the next page.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	q := filter.values()
	for k, v := range map[string]string{"order": *order, "cursor": *cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if *limit != 0 {
		q.Set("limit", fmt.Sprint(*limit))
	}
	var page admin.TaskPage
	return api.show(ctx, "tasks list", "/tasks", q, &page, stdout, stderr, func(w io.Writer) {
		tw := newTable(w)
		fmt.Fprintln(tw, "ID\tNAME\tKEY\tSTATUS\tDUE\tATTEMPT\tOWNER")
		for _, t := range page.Tasks {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d/%d\t%s\n", t.ID, t.Name, t.Key, t.Status, t.DueAt.Format(time.RFC3339), t.Attempt, t.MaxRetry, t.OwnerService)
		}
		tw.Flush()
		if page.Next != "" {
			fmt.Fprintf(w, "next: %s\n", page.Next)
		}
	})
}

func tasksShow(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tasks show", flag.ContinueOnError)
	var api apiFlags
	api.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: ax tasks show ID [flags]\n\nPrints one task and its executions.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && isHelp(args[0]) {
			code, _ := parseFlags(fs, args[:1], stdout, stderr)
			return code
		}
		fmt.Fprintf(stderr, "ax tasks show: missing task ID (it comes first, before the flags)\n\n")
		fs.Usage()
		return exitUsage
	}
	id := args[0]
	if code, ok := parseFlags(fs, args[1:], stdout, stderr); !ok {
		return code
	}
	var detail admin.TaskDetail
	return api.show(ctx, "tasks show", "/tasks/"+url.PathEscape(id), nil, &detail, stdout, stderr, func(w io.Writer) {
		t := detail.Task
		tw := newTable(w)
		status := t.Status
		if t.Superseded {
			status += " (superseded: a newer task has its key)"
		}
		rows := [][2]string{{"id", fmt.Sprint(t.ID)}, {"name", t.Name}, {"key", t.Key}, {"status", status},
			{"due", t.DueAt.Format(time.RFC3339Nano)}, {"attempt", fmt.Sprintf("%d of %d retries", t.Attempt, t.MaxRetry)},
			{"snoozes", fmt.Sprint(t.Snoozes)}, {"owner", t.OwnerService}, {"last error", t.LastError}}
		if t.CancelledBy != "" && t.CancelRequestedAt != nil {
			cancel := "asked by " + t.CancelledBy + " at " + t.CancelRequestedAt.Format(time.RFC3339Nano)
			if t.Status == "RUNNING" {
				cancel += ": its handler is being stopped"
			}
			rows = append(rows, [2]string{"cancel", cancel})
		}
		for _, row := range rows {
			fmt.Fprintf(tw, "%s:\t%s\n", row[0], row[1])
		}
		tw.Flush()
		if len(detail.Executions) == 0 {
			return
		}
		fmt.Fprintln(w)
		tw = newTable(w)
		fmt.Fprintln(tw, "EXECUTION\tATTEMPT\tNODE\tSTATUS\tSTARTED\tFINISHED\tERROR")
		for _, e := range detail.Executions {
			finished := ""
			if e.FinishedAt != nil {
				finished = e.FinishedAt.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.Attempt, e.Node, e.Status, e.StartedAt.Format(time.RFC3339), finished, firstLine(e.Error))
		}
		tw.Flush()
	})
}

// firstLine is s up to its first line break (a panic's error carries its stack).
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// runSchedules is `ax schedules list|pause|resume`.
func runSchedules(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("schedules list", flag.ContinueOnError)
	var api apiFlags
	api.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: ax schedules list [flags]                 the schedules, paused or not, with their next and last slots
       ax schedules pause NAME [--reason R]     pause a schedule
       ax schedules resume NAME [--reason R]    resume it from its next slot
       ax schedules trigger NAME --reason R     an occurrence now, marked manual

flags of list:
`)
		fs.PrintDefaults()
	}
	const actions = "list, pause, resume or trigger"
	switch {
	case len(args) > 0 && isHelp(args[0]):
		code, _ := parseFlags(fs, args[:1], stdout, stderr)
		return code
	case len(args) == 0:
		fmt.Fprintf(stderr, "ax schedules: missing action: want %s\n\n", actions)
		fs.Usage()
		return exitUsage
	case args[0] == "pause" || args[0] == "resume" || args[0] == "trigger":
		return scheduleAction(ctx, args[0], args[1:], stdout, stderr)
	case args[0] != "list":
		fmt.Fprintf(stderr, "ax schedules: unknown action %q (it comes first, before the flags): want %s\n\n", args[0], actions)
		fs.Usage()
		return exitUsage
	}
	if code, ok := parseFlags(fs, args[1:], stdout, stderr); !ok {
		return code
	}
	var out admin.Schedules
	return api.show(ctx, "schedules list", "/schedules", nil, &out, stdout, stderr, func(w io.Writer) {
		tw := newTable(w)
		fmt.Fprintln(tw, "NAME\tSPEC\tZONE\tOVERLAP\tSTATE\tNEXT\tLAST")
		for _, sc := range out.Schedules {
			state := "active"
			if sc.Paused {
				state = "paused"
			}
			if sc.Dormant {
				state += ", dormant"
			}
			last := ""
			if sc.LastFireAt != nil {
				last = sc.LastFireAt.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", sc.Name, sc.Spec, sc.TimeZone, sc.Overlap, state, sc.NextFireAt.Format(time.RFC3339), last)
		}
		tw.Flush()
	})
}

// runNames is `ax names list|pause|resume|limit`.
func runNames(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("names list", flag.ContinueOnError)
	var api apiFlags
	api.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: ax names list [flags]                 the task names ever paused or limited, and their state
       ax names pause NAME [--reason R]     no replica claims the name's tasks until it is resumed
       ax names resume NAME [--reason R]    its waiting tasks run again, in due order
       ax names limit NAME --concurrency N  at most N of its tasks run at once on all replicas (0: no limit)
       ax names limit NAME --rate N --per D at most N of its tasks start in any window of D (0: no limit)

flags of list:
`)
		fs.PrintDefaults()
	}
	const actions = "list, pause, resume or limit"
	switch {
	case len(args) > 0 && isHelp(args[0]):
		code, _ := parseFlags(fs, args[:1], stdout, stderr)
		return code
	case len(args) == 0:
		fmt.Fprintf(stderr, "ax names: missing action: want %s\n\n", actions)
		fs.Usage()
		return exitUsage
	case args[0] == "pause" || args[0] == "resume":
		return nameAction(ctx, args[0], args[1:], stdout, stderr)
	case args[0] == "limit":
		return nameLimit(ctx, args[1:], stdout, stderr)
	case args[0] != "list":
		fmt.Fprintf(stderr, "ax names: unknown action %q (it comes first, before the flags): want %s\n\n", args[0], actions)
		fs.Usage()
		return exitUsage
	}
	if code, ok := parseFlags(fs, args[1:], stdout, stderr); !ok {
		return code
	}
	var out admin.Names
	return api.show(ctx, "names list", "/names", nil, &out, stdout, stderr, func(w io.Writer) {
		tw := newTable(w)
		fmt.Fprintln(tw, "NAME\tSTATE\tCONCURRENCY\tIN USE\tPER KEY\tRATE\tCHANGED BY\tCHANGED AT")
		for _, n := range out.Names {
			at := ""
			if n.ChangedAt != nil {
				at = n.ChangedAt.Format(time.RFC3339)
			}
			inUse := "-"
			if n.Concurrency > 0 {
				inUse = strconv.Itoa(n.InFlight)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, nameState(n), limitText(n.Concurrency), inUse, keysText(n), rateText(n), n.ChangedBy, at)
		}
		tw.Flush()
	})
}

// limitText is a concurrency limit as the CLI prints it: "-" for none.
func limitText(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

// keysText is a name's limits per task key as the CLI prints them: how many of its
// tasks sharing a key may run at once, then, if it has one, its rate per key as
// "N/PER".
func keysText(n admin.NameView) string {
	s := strconv.Itoa(max(n.KeyConcurrency, 1))
	if n.KeyRate > 0 {
		s += ", " + strconv.Itoa(n.KeyRate) + "/" + n.KeyPer
	}
	return s
}

// rateText is a name's rate limit as the CLI prints it: "N/PER", or "-" for none.
func rateText(n admin.NameView) string {
	if n.Rate == 0 {
		return "-"
	}
	return strconv.Itoa(n.Rate) + "/" + n.Per
}

// nameState is "paused" or "active".
func nameState(n admin.NameView) string {
	if n.Paused {
		return "paused"
	}
	return "active"
}
