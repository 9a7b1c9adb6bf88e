// Package agent is herd's composition root: it loads the agent
// configuration, wires gossip, the raftstore, the HTTP API and, while this
// agent leads, the controllers and the executor, and runs them until the
// process is told to stop. It holds no business logic of its own; each
// concern lives in its own package and is handed its dependencies here.
package agent
