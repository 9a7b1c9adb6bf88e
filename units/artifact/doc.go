// Package artifact is the board side of pod artifacts (api.Artifact): the
// code behind `herd artifact fetch`, which a pod's unit runs before its
// process (ExecStartPre=+, as root even for a pod with a user), and the
// one home of that command's argv (Argv, which package units renders) and
// of the failure record the leader reads (StatusDir, ParseStatus).
//
// # Fetch
//
// For each artifact of the unit, in order:
//
//  1. the cache: CacheDir/<sha256> (root-only 0700 directory under herd's
//     state, so it survives reboots) is copied to the artifact's path
//     through boardfs.PutFile, which follows no symbolic link in any
//     component of the path, writes a temporary file with the mode set
//     before any byte, and renames it over the path. The bytes are hashed
//     as they are copied and the rename only happens when they match: a
//     damaged cache entry writes nothing, is removed and fetched again. A
//     cache hit needs no network, so a board rebooted while cut off from
//     the file server still starts its pod.
//  2. otherwise the URL is downloaded (Config: a deadline for the whole
//     download, dial, TLS and response-header timeouts, at most
//     MaxRedirects redirects, each to an http(s) URL that passes
//     api.ArtifactURLProblem, never from https to http; only status 200;
//     at most api.MaxArtifactSize bytes) into the cache with
//     boardfs.PutFile, hashed while streaming: a body whose SHA-256 is not
//     the artifact's never becomes a cache entry. Then step 1.
//
// Memory use is bounded by the copy buffers, whatever the size.
//
// # Failures and retries
//
// A failure writes StatusDir/<unit> (under /run: forgotten on reboot) and
// exits non-zero, so systemd does not start the process. Its first line is
// "KIND MESSAGE" (KIND one of the Kind constants; MESSAGE one line, at most
// maxMessage bytes, built by herd, never a server's text), which the
// leader's unit listing carries to the pod's ArtifactsFetched condition;
// the second holds the failure count, its time and a digest of the
// artifact list, for the backoff. A successful fetch removes the file; a
// fetch stopped by SIGTERM (systemctl stop) records nothing.
//
// systemd restarts a failed pod after RestartSec=1 and never gives up
// (StartLimitIntervalSec=0 for restart policies always and on-failure), so
// the backoff lives here: after the n-th failure in a row for the same
// artifact list, a fetch that needs the network waits until
// Backoff(n) (10 s doubling up to 5 min) has passed since that failure,
// sleeping at most MaxWait per run and exiting with the recorded failure
// if the time has not come, without touching the network. The file server
// sees at most one request per backoff period per pod, and the unit
// leaves the activating state about every MaxWait. A changed artifact list
// starts afresh; a cache hit is never delayed.
package artifact
