package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/herd-dev/herd/api"
)

func (a *app) createCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:               "create",
		Short:             "Create a secret (other objects come from manifests: herdctl apply)",
		Args:              cobra.ArbitraryArgs,
		RunE:              groupRunE,
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.AddCommand(a.createSecretCmd())
	return cmd
}

func (a *app) createSecretCmd() *cobra.Command {
	var (
		from      []string
		overwrite bool
	)
	cmd := &cobra.Command{
		Use:   "secret NAME --from-file [KEY=]PATH...",
		Short: "Create or replace a secret from files",
		Long: `Create a secret: named values (passwords, tokens, keys) that pods get as
systemd credentials. Each --from-file KEY=PATH makes PATH's content the value
of KEY; --from-file PATH takes the key from the file's name; PATH - reads
standard input (once). Values are never taken from the command line, where
every local user could read them in /proc.

The server that receives the write seals every value with a key only servers
hold before it reaches the cluster's state: get and describe show key names
and keyed hashes, never values. A template names the secret in its secrets
list; its pods read $CREDENTIALS_DIRECTORY/NAME_KEY.

--overwrite replaces every key of an existing secret (keys not given are
gone); the pods that use it roll to the new values like a template change.`,
		Example: `  herdctl create secret db --from-file password=./db-password.txt
  herdctl create secret tls --from-file ./tls.crt --from-file ./tls.key
  printf %s "$PW" | herdctl create secret db --from-file password=- --overwrite`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("create secret: want exactly one NAME, got %d arguments (values come from --from-file, never from arguments)", len(args))
			}
			if len(from) == 0 {
				return usagef("create secret %s: at least one --from-file [KEY=]PATH", args[0])
			}
			req := api.SecretRequest{Metadata: api.ObjectMeta{Name: args[0]}, Data: map[string][]byte{}}
			stdinUsed := false
			for _, f := range from {
				key, path, err := fromFileFlag(f)
				if err != nil {
					return err
				}
				if _, dup := req.Data[key]; dup {
					return usagef("--from-file %s: key %q given twice", f, key)
				}
				if path == "-" {
					if stdinUsed {
						return usagef("--from-file %s: standard input can be read once", f)
					}
					stdinUsed = true
				}
				v, err := readSecretValue(path, a.stdin)
				if err != nil {
					return fmt.Errorf("--from-file %s: %w", f, err)
				}
				req.Data[key] = v
			}
			if errs := api.ValidateSecretRequest(&req); len(errs) > 0 {
				return errs
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.cmdContext(cmd, defaultRequestTimeout)
			defer cancel()
			raw, err := c.PutSecret(ctx, req, overwrite)
			if err != nil {
				if api.IsCode(err, api.CodeExists) {
					return fmt.Errorf("%s exists: add --overwrite to replace its keys", ref(api.KindSecret, args[0]))
				}
				return fmt.Errorf("%s: %w", ref(api.KindSecret, args[0]), err)
			}
			o, err := api.FromRaw(raw)
			if err != nil {
				return err
			}
			s := o.(*api.Secret)
			verb := "created"
			if overwrite {
				verb = "replaced"
			}
			fmt.Fprintf(a.stdout, "%s %s: keys %s, version %s\n", ref(api.KindSecret, s.Metadata.Name), verb,
				strings.Join(s.Keys(), ", "), api.SecretVersion(s))
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&from, "from-file", nil, "KEY=PATH (or PATH: the key is its file name; - is standard input): a value of the secret; repeatable")
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "replace every key of an existing secret (it must exist)")
	return cmd
}

// fromFileFlag splits a --from-file value into its key and path.
func fromFileFlag(f string) (key, path string, err error) {
	if k, p, ok := strings.Cut(f, "="); ok {
		key, path = k, p
	} else {
		key, path = filepath.Base(f), f
		if f == "-" {
			return "", "", usagef("--from-file -: standard input needs a key: --from-file KEY=-")
		}
	}
	if path == "" {
		return "", "", usagef("--from-file %s: missing PATH after %q", f, key+"=")
	}
	if msg := api.SecretKeyProblem(key); msg != "" {
		return "", "", usagef("--from-file %s: %q is not a valid key: %s", f, key, msg)
	}
	return key, path, nil
}

// readSecretValue reads one value, at most api.MaxSecretValueBytes.
func readSecretValue(path string, stdin io.Reader) ([]byte, error) {
	var r io.Reader
	if path == "-" {
		if stdin == nil {
			return nil, errors.New("no standard input")
		}
		r = stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, api.MaxSecretValueBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > api.MaxSecretValueBytes {
		return nil, fmt.Errorf("over %d bytes: a secret holds small values (passwords, tokens, keys), not files", api.MaxSecretValueBytes)
	}
	return b, nil
}
