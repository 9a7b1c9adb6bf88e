package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
	"github.com/herd-dev/herd/internal/clock"
)

// Version is herdctl's version, set at build time with
// -ldflags "-X github.com/herd-dev/herd/cli.Version=v1.2.3".
var Version = "dev"

// Exit codes of Run.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// Timeouts used when --timeout is not given.
const (
	defaultRequestTimeout = 30 * time.Second
	defaultWaitTimeout    = 5 * time.Minute
	completionTimeout     = 2 * time.Second
)

// apiClient is the part of *client.Client herdctl uses. Implementations must
// be safe for use by one goroutine at a time; Watch's channel is closed when
// ctx ends or the stream breaks.
type apiClient interface {
	List(ctx context.Context, kind api.Kind) ([]api.RawObject, uint64, error)
	Get(ctx context.Context, kind api.Kind, name string) (api.RawObject, error)
	Apply(ctx context.Context, objs []api.Object, dryRun bool) ([]api.ApplyResult, error)
	Delete(ctx context.Context, kind api.Kind, name string) error
	Scale(ctx context.Context, name string, replicas int) (api.RawObject, error)
	// Update writes obj's labels and spec, compare-and-swap on its
	// resourceVersion (cordon).
	Update(ctx context.Context, obj api.Object) (api.RawObject, error)
	Watch(ctx context.Context, kind api.Kind, fromRV uint64) (<-chan api.WatchEvent, error)
	Status(ctx context.Context) (api.ClusterStatus, error)
	// Logs writes pod name's journal to w; with opts.Follow it returns when
	// ctx ends.
	Logs(ctx context.Context, name string, opts client.LogOptions, w io.Writer) error
	// PutSecret creates (or, with overwrite, replaces) a secret from its
	// plain values, which the server seals.
	PutSecret(ctx context.Context, req api.SecretRequest, overwrite bool) (api.RawObject, error)
}

var _ apiClient = (*client.Client)(nil)

// env is everything a herdctl run touches outside its arguments; tests
// replace parts of it.
type env struct {
	ctx            context.Context
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	clock          clock.Clock
	// newClient makes a client for t; timeout, when positive, bounds each
	// request (--timeout).
	newClient func(t target, timeout time.Duration) (apiClient, error)
	api       apiFuncs
	// watchRetry is the pause before re-listing after a watch stream broke.
	watchRetry time.Duration
}

func newClient(t target, timeout time.Duration) (apiClient, error) {
	if t.SSH != nil {
		return newTunnelClient(t, timeout)
	}
	return client.New(t.Addrs, client.Options{Token: t.Token, Timeout: timeout})
}

// Run runs herdctl with args (without the program name) and returns the
// process exit code: 0 on success, 1 on errors, 2 on usage errors (unknown
// command or flag, wrong arguments). Errors are printed to stderr as
// "error: ...". Run stops early, as after an error, on SIGINT.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return run(args, env{
		ctx:        ctx,
		stdin:      stdin,
		stdout:     stdout,
		stderr:     stderr,
		getenv:     os.Getenv,
		clock:      clock.RealClock(),
		newClient:  newClient,
		api:        defaultAPIFuncs(),
		watchRetry: time.Second,
	})
}

func run(args []string, e env) int {
	a := &app{env: e}
	root := a.rootCmd()
	if args == nil {
		args = []string{} // cobra falls back to os.Args on nil
	}
	root.SetArgs(args)
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	cmd, err := root.ExecuteContextC(e.ctx)
	if err == nil {
		return exitOK
	}
	if cmd == nil {
		cmd = root
	}
	return printError(e.stderr, cmd, err)
}

// printError prints err and returns the exit code it deserves.
func printError(w io.Writer, cmd *cobra.Command, err error) int {
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(w, "error: %v\nRun '%s --help' for usage.\n", ue.err, cmd.CommandPath())
		return exitUsage
	}
	var fe fieldErrors
	if errors.As(err, &fe) {
		for _, f := range fe {
			fmt.Fprintf(w, "error: %s\n", formatFieldError(f))
		}
		return exitError
	}
	var ae *api.APIError
	if errors.As(err, &ae) && len(ae.Fields) > 0 {
		for _, f := range ae.Fields {
			fmt.Fprintf(w, "error: %s\n", formatFieldError(f))
		}
		return exitError
	}
	var me multiError
	if errors.As(err, &me) {
		for _, e := range me {
			fmt.Fprintf(w, "error: %v\n", e)
		}
		return exitError
	}
	// Continuation lines (errors.Join) are indented under the first.
	fmt.Fprintf(w, "error: %s\n", strings.ReplaceAll(err.Error(), "\n", "\n  "))
	return exitError
}

// usageError is a mistake in how herdctl was called: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// fieldErrors are validation problems, printed one per line.
type fieldErrors []api.FieldError

func (fe fieldErrors) Error() string {
	parts := make([]string, len(fe))
	for i, f := range fe {
		parts[i] = formatFieldError(f)
	}
	return strings.Join(parts, "; ")
}

// formatFieldError renders "deployments/web: spec.replicas: must be >= 0".
func formatFieldError(f api.FieldError) string {
	var b strings.Builder
	if f.Object != "" {
		b.WriteString(f.Object + ": ")
	}
	if f.Field != "" {
		b.WriteString(f.Field + ": ")
	}
	b.WriteString(f.Message)
	return b.String()
}

// multiError is several independent errors, printed one per line.
type multiError []error

func (me multiError) Error() string {
	parts := make([]string, len(me))
	for i, e := range me {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// app holds the global flags and the environment for one run.
type app struct {
	env
	addrs       []string
	token       string // --token, refused: a token never goes on argv
	tokenFile   string
	contextName string
	configPath  string
	timeout     time.Duration
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "herdctl",
		Short: "herdctl controls a herd cluster",
		Long: `herdctl controls a herd cluster: apply TOML manifests, look at what runs
where, follow rollouts, read pods' logs, scale, delete, and see the cluster's
status.

The agent is found through --addr, else $HERD_ADDR, else the current context
of the config file (see "herdctl config"), else ` + client.DefaultAddr + `.
The API token comes from --token-file, the --context context's token_file
(or token), $HERD_TOKEN, $HERD_TOKEN_FILE, else the current context when its
own addresses are used; for a loopback address with none of these, from the
file ` + "`herd agent -dev`" + ` writes ($XDG_CONFIG_HOME/herd/dev.token). A token is
never taken from the command line.`,
		SilenceErrors:     true,
		SilenceUsage:      true,
		Args:              cobra.ArbitraryArgs,
		RunE:              groupRunE,
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringSliceVar(&a.addrs, "addr", nil, "agent API address(es), repeatable or comma-separated; tried in order (http://host:port, https://..., unix:///path)")
	pf.StringVar(&a.tokenFile, "token-file", "", "file holding the API token (default: the context's token_file or token, $HERD_TOKEN, $HERD_TOKEN_FILE)")
	pf.StringVar(&a.token, "token", "", "refused: use --token-file or $HERD_TOKEN")
	_ = pf.MarkHidden("token")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if cmd.Flags().Changed("token") {
			return usagef("--token is not accepted: a token on the command line is visible to every local user in /proc; use --token-file FILE, $HERD_TOKEN or $HERD_TOKEN_FILE")
		}
		return nil
	}
	pf.StringVar(&a.contextName, "context", "", "config file context to use (default current_context)")
	pf.StringVar(&a.configPath, "config", "", "config file (default $XDG_CONFIG_HOME/herd/config.toml or ~/.config/herd/config.toml)")
	pf.DurationVar(&a.timeout, "timeout", 0, "limit for the whole command (default 30s; 5m for apply --wait and rollout status; none for get --watch and logs -f)")

	root.AddCommand(
		a.applyCmd(),
		a.diffCmd(),
		a.getCmd(),
		a.describeCmd(),
		a.deleteCmd(),
		a.scaleCmd(),
		a.cordonCmd(true),
		a.cordonCmd(false),
		a.drainCmd(),
		a.rebalanceCmd(),
		a.rolloutCmd(),
		a.createCmd(),
		a.logsCmd(),
		a.eventsCmd(),
		a.metricsCmd(),
		a.statusCmd(),
		a.dashboardCmd(),
		a.versionCmd(),
		a.configCmd(),
		a.completionCmd(),
		a.bootstrapCmd(),
		a.upgradeCmd(),
	)
	return root
}

// groupRunE runs a command that only groups subcommands: help without
// arguments, a usage error for an unknown subcommand.
func groupRunE(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	return usageError{errors.New(msg)}
}

// argsBetween checks the number of positional arguments, as a usage error.
func argsBetween(min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) >= min && (max < 0 || len(args) <= max) {
			return nil
		}
		want := strings.TrimSpace(strings.TrimPrefix(cmd.Use, cmd.Name()))
		if len(args) < min {
			return usagef("%s: missing arguments: want %s", cmd.CommandPath(), want)
		}
		return usagef("%s: too many arguments (%q): want %s", cmd.CommandPath(), args[max:], want)
	}
}

// configFile returns the config file's path.
func (a *app) configFile() (string, error) {
	if a.configPath != "" {
		return a.configPath, nil
	}
	return defaultConfigPath(a.getenv)
}

// loadConfig reads the config file; a missing file is an empty config.
func (a *app) loadConfig() (config, string, error) {
	path, err := a.configFile()
	if err != nil {
		return config{}, "", err
	}
	c, err := loadConfig(path)
	return c, path, err
}

// target resolves where to send requests.
func (a *app) target() (target, error) {
	var cfg config
	var configDir string
	// Without a config file path (no $HOME) herdctl still works with
	// --addr or $HERD_ADDR, unless a context was asked for.
	if path, err := a.configFile(); err == nil {
		configDir = filepath.Dir(path)
		if cfg, err = loadConfig(path); err != nil {
			return target{}, err
		}
	} else if a.contextName != "" {
		return target{}, err
	}
	return resolveTarget(targetInput{
		FlagAddrs:     a.addrs,
		FlagTokenFile: a.tokenFile,
		ConfigDir:     configDir,
		FlagContext:   a.contextName,
		Getenv:        a.getenv,
		Config:        cfg,
	})
}

// client returns a client for the resolved target.
func (a *app) client() (apiClient, error) {
	t, err := a.target()
	if err != nil {
		return nil, err
	}
	a.useSSH(&t)
	return a.newClient(t, a.timeout)
}

// cmdContext returns the command's context limited by --timeout, or by def
// when --timeout is not set (def 0: no limit).
func (a *app) cmdContext(cmd *cobra.Command, def time.Duration) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	d := def
	if a.timeout > 0 {
		d = a.timeout
	}
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// streamContext is cmdContext for a command that may stream until stopped
// (get -w, events -w, logs -f): no default limit when it streams.
func (a *app) streamContext(cmd *cobra.Command, stream bool) (context.Context, context.CancelFunc) {
	if stream {
		return a.cmdContext(cmd, 0)
	}
	return a.cmdContext(cmd, defaultRequestTimeout)
}

// waitContext is cmdContext for a command that may wait for a rollout
// (apply --wait, rollout undo --wait): a longer default limit then.
func (a *app) waitContext(cmd *cobra.Command, wait bool) (context.Context, context.CancelFunc) {
	if wait {
		return a.cmdContext(cmd, defaultWaitTimeout)
	}
	return a.cmdContext(cmd, defaultRequestTimeout)
}

// effectiveTimeout is the limit a.cmdContext applies for def.
func (a *app) effectiveTimeout(def time.Duration) time.Duration {
	if a.timeout > 0 {
		return a.timeout
	}
	return def
}

// completeNames completes object names of kind by listing them.
func (a *app) completeNames(cmd *cobra.Command, kind api.Kind, exclude []string) []string {
	c, err := a.client()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	objs, _, err := c.List(ctx, kind)
	if err != nil {
		return nil
	}
	skip := map[string]bool{}
	for _, n := range exclude {
		skip[n] = true
	}
	var out []string
	for _, o := range objs {
		if !skip[o.Metadata.Name] {
			out = append(out, o.Metadata.Name)
		}
	}
	return out
}

// kindThenNames is a ValidArgsFunction for "KIND NAME...": kinds first, then
// names of that kind (at most maxNames of them; -1 for any number).
func (a *app) kindThenNames(maxNames int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return kindCompletions(), cobra.ShellCompDirectiveNoFileComp
		}
		if maxNames >= 0 && len(args)-1 >= maxNames {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		kind, err := parseKind(args[0])
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return a.completeNames(cmd, kind, args[1:]), cobra.ShellCompDirectiveNoFileComp
	}
}

// apiErrorCode returns the API error code in err ("not_found", ...), or "".
func apiErrorCode(err error) string {
	var ae *api.APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// isNotFound reports whether err is the API's not_found error.
func isNotFound(err error) bool {
	var ae *api.APIError
	if errors.As(err, &ae) {
		return ae.Code == "not_found" || (ae.Code == "" && ae.StatusCode == 404)
	}
	return false
}
