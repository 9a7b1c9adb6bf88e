package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/herd-dev/herd/api"
)

func (a *app) deleteCmd() *cobra.Command {
	var files []string
	var ignoreNotFound bool
	cmd := &cobra.Command{
		Use:   "delete (KIND NAME... | -f PATH)",
		Short: "Delete objects by name or as named in manifests",
		Example: `  herdctl delete deploy web api
  herdctl delete service/web
  herdctl delete -f manifests/ --ignore-not-found`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: a.kindThenNames(-1),
		RunE: func(cmd *cobra.Command, args []string) error {
			type item struct {
				kind api.Kind
				name string
			}
			var items []item
			switch {
			case len(files) > 0 && len(args) > 0:
				return usagef("delete: give either KIND NAME... or -f PATH, not both")
			case len(files) > 0:
				ms, err := loadManifests(files, a.stdin, a.api.decodeManifests)
				if err != nil {
					return err
				}
				for _, m := range ms {
					items = append(items, item{m.Object.GetKind(), m.Object.GetMeta().Name})
				}
			default:
				kind, names, err := splitKindName(args)
				if err != nil {
					return err
				}
				if len(names) == 0 {
					return usagef("delete: missing NAME (or -f PATH)")
				}
				for _, n := range names {
					items = append(items, item{kind, n})
				}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.cmdContext(cmd, defaultRequestTimeout)
			defer cancel()
			var errs multiError
			for _, it := range items {
				r := ref(it.kind, it.name)
				err := c.Delete(ctx, it.kind, it.name)
				switch {
				case err == nil:
					fmt.Fprintf(a.stdout, "%s deleted\n", r)
				case isNotFound(err) && ignoreNotFound:
					fmt.Fprintf(a.stderr, "%s not found\n", r)
				case isNotFound(err):
					errs = append(errs, fmt.Errorf("%s not found", r))
				default:
					errs = append(errs, fmt.Errorf("%s: %w", r, err))
					if ctx.Err() != nil {
						return errs
					}
				}
			}
			if len(errs) > 0 {
				return errs
			}
			return nil
		},
	}
	addFileFlag(cmd, &files, "manifests naming the objects to delete")
	cmd.Flags().BoolVar(&ignoreNotFound, "ignore-not-found", false, "report objects that do not exist but do not fail")
	return cmd
}

func (a *app) scaleCmd() *cobra.Command {
	var replicas int
	cmd := &cobra.Command{
		Use:   "scale deployment NAME --replicas N",
		Short: "Set the number of replicas of a deployment",
		Long: `Set the number of replicas of a deployment. A manifest that leaves replicas
out leaves this count alone on the next apply.`,
		Example: `  herdctl scale deploy web --replicas 5
  herdctl scale deployment/web --replicas 0`,
		Args: argsBetween(1, 2),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			switch len(args) {
			case 0:
				return []string{string(api.KindDeployment)}, cobra.ShellCompDirectiveNoFileComp
			case 1:
				return a.completeNames(cmd, api.KindDeployment, nil), cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, err := getArgs(args)
			if err != nil {
				return err
			}
			if kind != api.KindDeployment {
				return usagef("scale: only deployments can be scaled, not %s", kind)
			}
			if name == "" {
				return usagef("scale: missing NAME")
			}
			if !cmd.Flags().Changed("replicas") {
				return usagef("scale: --replicas is required")
			}
			if replicas < 0 {
				return usagef("scale: --replicas %d: must be 0 or more", replicas)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.cmdContext(cmd, defaultRequestTimeout)
			defer cancel()
			if _, err := c.Scale(ctx, name, replicas); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s scaled to %d\n", ref(kind, name), replicas)
			return nil
		},
	}
	cmd.Flags().IntVar(&replicas, "replicas", 0, "the number of replicas (required)")
	return cmd
}

func (a *app) statusCmd() *cobra.Command {
	return &cobra.Command{
		Use:               "status",
		Short:             "Show the cluster: leader, Raft servers, gossip members",
		Args:              argsBetween(0, 0),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.cmdContext(cmd, defaultRequestTimeout)
			defer cancel()
			st, err := c.Status(ctx)
			if err != nil {
				return err
			}
			d := &descBuilder{}
			d.kv(0, "Node", st.Node)
			leader := st.Leader
			if leader == "" {
				leader = "<none> (no leader: writes are not possible)"
			}
			d.kv(0, "Leader", leader)
			d.kv(0, "Version", st.Version)
			if len(st.Servers) == 0 {
				d.kv(0, "Servers", "")
			} else {
				d.title(0, "Servers")
				t := &table{Header: []string{"ID", "ADDRESS", "SUFFRAGE", "LEADER"}}
				for _, s := range st.Servers {
					l := ""
					if s.Leader {
						l = "*"
					}
					t.Rows = append(t.Rows, []string{s.ID, s.Address, s.Suffrage, l})
				}
				d.table(1, t)
			}
			if len(st.Members) == 0 {
				d.kv(0, "Members", "")
			} else {
				d.title(0, "Members")
				t := &table{Header: []string{"NAME", "ADDRESS", "STATE", "ROLE"}}
				for _, m := range st.Members {
					role := "worker"
					if m.Server {
						role = "server"
					}
					t.Rows = append(t.Rows, []string{m.Name, m.Addr, string(m.State), role})
				}
				d.table(1, t)
			}
			fmt.Fprint(a.stdout, d.String())
			return nil
		},
	}
}

func (a *app) versionCmd() *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:               "version",
		Short:             "Print herdctl's version and the agent's",
		Args:              argsBetween(0, 0),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(a.stdout, "Client Version: %s\n", Version)
			if clientOnly {
				return nil
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.cmdContext(cmd, defaultRequestTimeout)
			defer cancel()
			st, err := c.Status(ctx)
			if err != nil {
				if errors.Is(err, context.Canceled) {
					return err
				}
				fmt.Fprintf(a.stderr, "Server Version: unknown (agent not reachable: %v)\n", err)
				return nil
			}
			fmt.Fprintf(a.stdout, "Server Version: %s\n", st.Version)
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print the client version only, do not contact the agent")
	return cmd
}

func (a *app) completionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script",
		Long: `Print a shell completion script. Kinds and object names complete too
(names are listed from the agent).

  bash:  source <(herdctl completion bash)
  zsh:   herdctl completion zsh > "${fpath[1]}/_herdctl"
  fish:  herdctl completion fish | source`,
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args:      argsBetween(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(a.stdout, true)
			case "zsh":
				return root.GenZshCompletion(a.stdout)
			case "fish":
				return root.GenFishCompletion(a.stdout, true)
			}
			return usagef("completion: unknown shell %q (want bash, zsh or fish)", args[0])
		},
	}
}

func (a *app) configCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Manage contexts in the config file",
		Long: `Manage contexts in herdctl's config file (default
$XDG_CONFIG_HOME/herd/config.toml or ~/.config/herd/config.toml):

  current_context = "lab"

  [[context]]
  name  = "lab"
  addrs = ["http://10.0.0.2:7948", "http://10.0.0.3:7948"]
  token = "..."`,
		Args:              cobra.ArbitraryArgs,
		RunE:              groupRunE,
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.AddCommand(a.useContextCmd(), a.getContextsCmd(), a.setContextCmd())
	return cmd
}

// contextNames completes a context name from the config file.
func (a *app) contextNames(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cfg, _, err := a.loadConfig()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, c := range cfg.Contexts {
		names = append(names, c.Name)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// useContextCmd is herdctl config use-context.
func (a *app) useContextCmd() *cobra.Command {
	return &cobra.Command{
		Use:               "use-context NAME",
		Short:             "Make NAME the current context",
		Args:              argsBetween(1, 1),
		ValidArgsFunction: a.contextNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, path, err := a.loadConfig()
			if err != nil {
				return err
			}
			if _, ok := cfg.context(args[0]); !ok {
				return fmt.Errorf("context %q is not in %s (add it with herdctl config set-context)", args[0], path)
			}
			cfg.CurrentContext = args[0]
			if err := saveConfig(path, cfg); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "Switched to context %q.\n", args[0])
			return nil
		},
	}
}

// getContextsCmd is herdctl config get-contexts.
func (a *app) getContextsCmd() *cobra.Command {
	return &cobra.Command{
		Use:               "get-contexts",
		Short:             "List the contexts",
		Args:              argsBetween(0, 0),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, path, err := a.loadConfig()
			if err != nil {
				return err
			}
			if len(cfg.Contexts) == 0 {
				fmt.Fprintf(a.stderr, "No contexts in %s.\n", path)
				return nil
			}
			t := &table{Header: []string{"CURRENT", "NAME", "ADDRS", "TOKEN", "SSH"}}
			for _, c := range cfg.Contexts {
				cur := ""
				if c.Name == cfg.CurrentContext {
					cur = "*"
				}
				tok := "no"
				switch {
				case c.TokenFile != "":
					tok = c.TokenFile
				case c.Token != "":
					tok = "inline"
				}
				ssh := ""
				if c.SSH != nil {
					ssh = strings.Join(c.SSH.Hosts, ",")
					if c.SSH.User != "" {
						ssh = c.SSH.User + "@" + ssh
					}
				}
				t.Rows = append(t.Rows, []string{cur, c.Name, orNone(strings.Join(c.Addrs, ",")), tok, orNone(ssh)})
			}
			fmt.Fprint(a.stdout, t.String())
			return nil
		},
	}
}

// setContextCmd is herdctl config set-context.
func (a *app) setContextCmd() *cobra.Command {
	var setAddrs []string
	var setToken, setTokenFile string
	set := &cobra.Command{
		Use:   "set-context NAME [--addr ADDR]... [--token-file FILE]",
		Short: "Create or update a context",
		Long: `Create or update a context. --addr replaces the context's addresses (repeat
it or separate addresses by commas) and --token-file its token file (one
token per line, the first is used; the file is read at each run, so rotating
it needs no config change); other settings are kept. The first context
created becomes the current one.`,
		Example:           `  herdctl config set-context lab --addr http://10.0.0.2:7948,http://10.0.0.3:7948`,
		Args:              argsBetween(1, 1),
		ValidArgsFunction: a.contextNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if strings.TrimSpace(name) == "" {
				return usagef("set-context: NAME is empty")
			}
			var addrs []string
			for _, s := range splitList(setAddrs...) {
				n, err := normalizeAddr(s)
				if err != nil {
					return usagef("--addr: %v", err)
				}
				addrs = append(addrs, n)
			}
			cfg, path, err := a.loadConfig()
			if err != nil {
				return err
			}
			c, exists := cfg.context(name)
			if !exists {
				cfg.Contexts = append(cfg.Contexts, configContext{Name: name})
				c = &cfg.Contexts[len(cfg.Contexts)-1]
			}
			if cmd.Flags().Changed("addr") {
				c.Addrs = addrs
			}
			if cmd.Flags().Changed("token") {
				return usagef("set-context: --token is not accepted (it would show in /proc); put the token in a file (0600) and give --token-file FILE")
			}
			if cmd.Flags().Changed("token-file") {
				c.TokenFile, c.Token = setTokenFile, ""
			}
			made := ""
			if cfg.CurrentContext == "" {
				cfg.CurrentContext = name
				made = " and made current"
			}
			if err := saveConfig(path, cfg); err != nil {
				return err
			}
			verb := "modified"
			if !exists {
				verb = "created"
			}
			fmt.Fprintf(a.stdout, "Context %q %s%s.\n", name, verb, made)
			return nil
		},
	}
	sf := set.Flags()
	sf.StringSliceVar(&setAddrs, "addr", nil, "the context's agent addresses (replaces them)")
	sf.StringVar(&setTokenFile, "token-file", "", "the context's API token file")
	sf.StringVar(&setToken, "token", "", "refused: use --token-file")
	_ = sf.MarkHidden("token")
	return set
}
