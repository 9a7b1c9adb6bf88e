// Package sshdtest starts a real OpenSSH sshd on 127.0.0.1 for tests: fresh
// ed25519 host and client keys in t.TempDir, a private sshd_config, a free
// port, and cleanup when the test ends. Tests of any package that talks to
// boards over SSH can use it; it skips the test when sshd is not installed
// (install openssh-server).
//
// It is Linux-oriented: Kill, Restart and PauseConnections find sshd's
// per-connection processes through /proc.
package sshdtest
