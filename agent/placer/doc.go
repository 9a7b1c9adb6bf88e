// Package placer owns the leader-side loop between desired state and the
// boards: it makes each board's systemd run exactly the pods bound to it,
// observes what runs there, and reports it back as pod and node status.
// The controllers (package agent/controller) decide; units renders and
// plans; the placer carries the plans out through an Executor (SSH in
// production, package fakeboard in tests) and folds what it sees into
// status with controller.ObservePod and controller.ObservedUnits.
//
// # Workers and passes
//
// Placer.Run keeps one worker goroutine per Node in the state, started when
// the node appears and stopped when it is deleted; every call for a node is
// made by its worker, so calls for one board are never concurrent. A pass
// over a board:
//
//  1. reads the current snapshot; only Ready boards (also while gossip
//     calls them dead, see below) and alive boards being fenced (NotReady
//     with the Fencing condition) get passes;
//  2. lists the board's herd units (Executor.ShowUnits; a witness, with
//     its own deadline, on a Ready board gossip calls dead);
//  3. plans with units.PlanBoard against the pods bound to the board that
//     are not terminal (Lost, Failed and Succeeded pods have no unit) and
//     executes the actions in order, stopping at the first error. The plan
//     is everything the pass does to the board, as data: a pod's
//     environment file, then its files and its unit file; a removed unit's
//     files (its X-Herd-Files), environment file and unit file, except
//     paths another pod bound to the board still uses; the daemon-reload,
//     enables, starts, restarts and stops. What the worker remembers goes
//     into the plan as input: a changed unit whose restart an earlier pass
//     did not get to (the file on the board is already current) is
//     restarted, remembered in memory only, so a leader change at that
//     exact moment leaves the old process running; and a pod whose files
//     the board refused gets no actions until its retry is due. The
//     executing loop only adds what a plan cannot know in advance: the
//     state check before each bring-up (see "Exactly N") and, when the
//     board refuses a pod's files, leaving out that unit's later actions
//     (and a daemon-reload with no other unit left to reload for) and
//     removing the environment file it just wrote for a unit the board
//     has no file of;
//  4. lists the units again if anything was done;
//  5. reports: ObservePod for every bound pod (with its readiness check:
//     tcp and http dialled from the leader to the board's address and host
//     port, exec run on the board as the pod's user; each with the probe's
//     timeout; a pod whose files were refused also gets its FilesWritten
//     condition), and
//     ObservedUnits for a board being fenced, which turns it Ready once no
//     stale unit is left. The writes go through the Writer, compare-and-swap
//     on the snapshot they were computed from.
//
// # Files, secrets and probes
//
// Every file goes through Executor.PutFile and Remove, which must not follow
// a symbolic link in any component of the path (the SSH executor uses the
// board helper, `herd board put-file`; see units/sshexec). A pod's user may
// own the directories its files live in, so a refusal (ErrFileRefused: a
// link where a directory is expected, or setuid/setgid bits without the
// file's allow_setid) is the pod's problem, not the pass's: the pod's unit
// is not written, enabled or started, the pass goes on with the other pods,
// and the pod gets the condition FilesWritten=False (reason FileRefused,
// the board's message). The write is tried again only after
// Config.ObserveInterval or once the pod changes, so a refusal never
// retries in a loop; the condition goes away once the files are written. A
// removal the board refuses leaves that file (logged) and does not keep a
// unit or a fenced board from being cleaned up.
//
// A pod's artifacts (api.Artifact) are not written by the placer: the
// unit's own ExecStartPre step downloads, verifies and places them on the
// board (package units/artifact). The unit listing (and so a board's
// report) carries the last failure of that step, which ObservePod turns
// into the pod's ArtifactsFetched=False condition; the artifact paths are
// in the unit's X-Herd-Files, so they are removed with the unit like its
// files.
//
// A scheduled job's pod has a second unit, its timer (units.RenderTimer):
// the plan writes, enables, starts and removes it beside the service, the
// state check before a bring-up covers it as the pod's, and a refusal of
// the pod's files holds its timer back too. The listing's timer state and
// the unit's last run go into the observation (controller.ObservePod),
// and for a job with concurrency allow the instances of its template
// (its runs, herd-<pod>@<id>.service), which the plan clears once
// finished and old, or takes down with the pod; they count in the plan
// key, so a run's start or end is planned for.
//
// A pod's environment goes to its own file (units' env file path, mode
// 0600, root-owned) in a directory the placer keeps at 0700 root, never in
// the world-readable unit file; the plan's write-env action writes it
// right before the unit's files, and it is removed with the unit, fencing
// included.
//
// A pod's credentials (the values of the secrets it loads) are written by
// its write action, before its files and unit file: the placer asks
// Config.Credentials for the values (on a server, the stored secrets
// opened with the server key ring) and writes each to
// units.CredentialPath (0600, root-owned, in units.CredentialDir, kept
// 0700 root); the unit file only names them (LoadCredential=). They are
// removed with the unit (the paths its LoadCredential= lines name), and
// by a refused write that wrote them for a unit the board has no file
// of. Values are never logged and never in a plan or an error.
//
// Exec readiness checks run through Executor.Probe in the pod's unit
// context: as the template's user (root only for a root pod), in its
// working directory, with its environment file, never in the executor's
// root session.
//
// # When passes run
//
// Watch events are only hints: on every burst of changes the placer reads a
// fresh snapshot and wakes the workers of the boards whose relevant state
// changed (the board's phase, address and liveness; the set of pods bound
// to it, their generation and whether they are terminal). Status the
// placer writes itself wakes a worker only when it makes a pod terminal or
// a board Ready. After a pass that acted, or
// while pods are still coming up or not ready, the worker re-observes after
// Config.QuickObserve pauses (three of 100 ms, 150, 200, 250, 500 ms, 1 s,
// 2 s).
// Otherwise a board
// that reports its units (see "Reports") gets a pass when a report comes
// and while a bound pod has a readiness check every Config.ObserveInterval
// (5 s, jittered; those passes list nothing), and is listed over SSH only
// every Config.ReportedListInterval (2 minutes, jittered) as a safety net;
// a board that does not report is listed every Config.ObserveInterval,
// which then bounds how late a crash, a failure or a readiness change is
// seen.
// A failed pass (board unreachable, command failed, write conflict) is
// retried after an exponential backoff capped at Config.RetryMax (5 s), and
// state changes do not cut the backoff short. A board that is down while
// gossip calls it dead (not Ready) gets only sweeps, every
// Config.WitnessInterval (every Config.RetryMax after a minute without an
// answer; the executor's own dial backoff spaces real dials further): a
// listing within Config.WitnessTimeout and, if the board answers, the
// removal of every herd unit no pod bound there wants, never a bring-up
// and no status write. Other boards that are down (NotReady and not
// fencing, Left, left in gossip) get no calls at all until the node
// controller says they are back.
//
// # Reports
//
// A board's own agent watches its herd units through systemd's D-Bus
// signals and sends a signed report of them to every server on each
// change and every minute (packages agent/unitwatch and agent/unitreport;
// the servers check the signature against the board's pinned host key
// before Reports.Put). The newest report per board is kept in Reports,
// which outlives a leadership term, and wakes the board's worker. A pass
// takes the units from a report newer than anything it has seen instead of
// listing the board, folds them into status as it would a listing, and
// lists over SSH before it acts (a plan that takes anything down is only
// ever made from a fresh listing; one that only places units the report
// does not show is carried out at once, see placesOnly), after acting, for
// witnesses and sweeps, and every ReportedListInterval. A new worker (a
// new leader's, or a new board's) does the same from its first pass,
// listing a reporting board over SSH for the first time an ObserveInterval
// (jittered) later, and meanwhile warms the executor's connection to it
// (Warmer): so the pods a new leader replaces right after taking over are
// placed without first waiting for listings of their boards. Until the
// worker has reached its board (that warm-up or a listing) it runs no
// readiness check and keeps each pod's Ready: the old leader's board,
// dead but still reported, would only make a check wait out its timeout
// in front of the witness. A board counts as reporting while its last report
// is younger than Config.ReportTTL (3 minutes); after that it is listed
// every ObserveInterval again. Reports are ordered by their unitreport.Mark;
// the SSH listing reads the mark of the report the board last began in the
// same round trip, so a report older than a listing never moves status
// backwards, and a report that was lost costs at most one
// ReportedListInterval.
//
// # Two witnesses before death
//
// Gossip declaring a board dead (≈1.5 s after it stops answering) only
// says its agent is gone: a kill -9 of the agent (systemd restarts it in
// ≈1 s), a frozen agent or an agent upgrade look the same as a power
// pull. So while a board gossip calls dead is still Ready, every pass over
// it is a witness: its first listing must come back within
// Config.WitnessTimeout (1.5 s) over the pooled SSH connection, and fails
// at once when the executor is a Silencer whose connection to the board
// has had a keepalive (or, with no connection yet, its TCP connect)
// unanswered (on Linux: unacknowledged by the board's TCP, while nothing
// else was) for over Config.WitnessSilence (300 ms; keepalives go every
// second, so a board that lost power has one outstanding by the time
// gossip calls it dead, and a new leader's first dial to it gets no
// answer). Any pass, witness or not, is cut short the same way, so a pass
// in flight when the power goes does not hold up the witness behind it:
// the cancelled command is not waited for, and a connect given up for
// silence still counts as silence for a second, so the witness right
// after such a pass fails at once.
// The outcome goes to
// Config.RecordWitness, which the node controller reads
// (controller.MemberInfo.Witness): a board that answered stays Ready with
// the condition AgentDown and keeps its pods; one that did not becomes
// NotReady and its pods are Lost (controller.ReconcileNode). Witness passes
// repeat every Config.WitnessInterval (1 s), failed or not, with no
// backoff, so a pod crash there is still observed and a later SSH failure
// is noticed within about a second. A new leader witnesses at once (its
// workers start with a pass).
//
// # Exactly N, and how long overlap can last
//
// The placer never brings a unit up (write, enable, start, restart) for a
// pod that is not bound to that board in the current snapshot: it re-reads
// the state right before each such step and abandons the pass if the pod
// was unbound, changed or became terminal, or the board stopped getting
// passes. Every herd-* unit on a board that is not bound there is stopped,
// disabled and removed by the first pass that sees it.
//
// A board gossip declares dead whose sshd and systemd still answer the
// leader is not dead: its agent is (crashed, frozen, restarting). Its pods
// are not Lost, nothing is replaced, and the placer goes on passing over it
// (every pass a witness), so exactly N keeps holding and an agent restart
// restarts no workload: pod units are their own systemd services, not tied
// to herd.service (no PartOf/BindsTo), and no pass restarts a unit whose
// file is current. The AgentDown board takes no new pods meanwhile.
//
// A board declared dead and not reachable over SSH either is left alone:
// systemd
// there keeps running its units (and, as they are enabled, starts them again
// if the board reboots), while the node controller marks its pods Lost and
// their owners replace them on other boards. During that time a replica may
// run twice. When the board comes back, the node controller keeps it
// NotReady and fencing; the placer's first pass stops and removes every unit
// not bound there (all of them, since its pods were Lost) and only then
// turns it Ready. A sweep usually gets there first: the moment the leader
// can reach the board over SSH again, before gossip has healed, its stale
// units are stopped. So overlap lasts at most for the partition plus one
// sweep interval (1 s, or the executor's dial backoff, at most 5 s, after a
// long cut) and a pass (a listing and a few systemctl calls). A
// board that stays partitioned from the leader but keeps power runs its
// stale units for as long as the partition lasts: the leader cannot reach it
// to stop them. Unless their template says on_disconnect stop_after: then
// the board's own agent stops them once it has been cut off from a
// majority of the servers that long (package agent/disconnect), which
// bounds the overlap by that setting plus the board's own detection of
// the cut. Such a unit carries a mark (units.UnitState.DisconnectMark):
// its pod, if still bound there (the servers had lost quorum, say), stays
// Scheduled and the plan starts it again; if it was replaced, the first
// pass after the heal removes it as any stale unit. A board reachable
// over SSH but not over gossip (a frozen agent) keeps its pods and so runs no copy
// twice; its pods are Lost only once SSH fails too, after which it is
// unreachable and the case above applies (overlap for as long as it stays
// cut off yet powered). If no witness comes within
// controller.WitnessGrace (3 s: no SSH address, no executor, a stuck
// call) the board is declared dead anyway.
// The placer also cannot take back a command already sent: a unit started
// just before its pod was unbound runs until the next pass (bounded by one
// pass after the unbinding, which wakes the worker).
package placer
