package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
)

// keys are the agent's secrets: the gossip keys (every member) and the
// server keys (servers only; nil on a gossip-only agent). The first of
// each is the primary one.
type keys struct {
	gossip, server [][]byte
}

// loadKeys finds the agent's keys: from opts, else from gossip_key_file
// and (servers only) server_key_file, falling back to the legacy
// cluster_key_file for a file that does not exist. A non-server never
// reads the server key, even when one is configured.
func loadKeys(cfg Config, opts Options, log *slog.Logger) (keys, error) {
	var ks keys
	var err error
	if ks.gossip, err = pickKeys("gossip", opts.GossipKeys, opts.ClusterKey, cfg.GossipKeyFile, cfg.ClusterKeyFile, log); err != nil {
		return keys{}, err
	}
	if cfg.Server {
		if ks.server, err = pickKeys("server", opts.ServerKeys, opts.ClusterKey, cfg.ServerKeyFile, cfg.ClusterKeyFile, log); err != nil {
			return keys{}, err
		}
	}
	return ks, nil
}

func pickKeys(what string, given [][]byte, cluster []byte, file, legacy string, log *slog.Logger) ([][]byte, error) {
	switch {
	case len(given) > 0:
		return given, nil
	case cluster != nil:
		return [][]byte{cluster}, nil
	}
	var fileErr error
	if file != "" {
		ks, err := ReadKeyFile(file)
		if err == nil {
			return ks, nil
		}
		if legacy == "" || !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("agent: %s_key_file: %w", what, err)
		}
		fileErr = err
	}
	if legacy == "" {
		return nil, fmt.Errorf("agent: %s_key_file is not set", what)
	}
	k, err := ReadClusterKey(legacy)
	if err != nil {
		if fileErr != nil && errors.Is(err, os.ErrNotExist) {
			// Neither exists: the key file is what is missing.
			return nil, fmt.Errorf("agent: %s_key_file: %w", what, fileErr)
		}
		return nil, fmt.Errorf("agent: cluster_key_file: %w", err)
	}
	log.Warn("using the legacy cluster key as the "+what+" key: one key for gossip and Raft lets any member act as a server; re-run herdctl bootstrap to give each purpose its own key",
		"clusterKeyFile", legacy, what+"KeyFile", file)
	return [][]byte{k}, nil
}
