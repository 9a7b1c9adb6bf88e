// Package scheduler owns pod placement: given an immutable snapshot of the
// nodes and the pods already placed on them, it picks a node for a pending
// pod and assigns its host ports, or explains why no node fits in a
// kubectl-like summary ("0/3 boards: 2 port 8080 in use, 1 not ready").
//
// Everything here is pure: values in, values out, no I/O, no clock, and no
// dependence on map iteration order, so the same snapshot always yields the
// same decision. The node controller, not the scheduler, decides which nodes
// are Ready; the executor, not the scheduler, starts what was placed. It is
// a package of its own, apart from the controllers that call it, because it
// is a self-contained algorithm with its own benchmark (BENCHMARKS.md: 500
// boards, 10,000 pods) and no use for the controllers' types.
//
// Placement is filter then score:
//
//   - filters, in this order, the first failing one being the node's reason:
//     node Ready, not cordoned (spec.unschedulable), node selector
//     (api.Node.MatchesNodeSelector: node labels plus the well-known
//     herd.dev/node, herd.dev/arch and herd.dev/model; "arch" and "model"
//     are shorthands), the template's devices (api.BoardFacts.MissingDevice:
//     the board advertises every one; the reason names the first missing,
//     "missing device /dev/i2c-1"), limits the board can enforce
//     (api.NodeStatus.UnenforcedLimit: a memory_limit needs the cgroup
//     memory controller, a cpu_limit the cpu controller, unless the
//     template says allow_unenforced_limits; a board whose agent reports
//     no cgroup facts counts as enforcing), fixed host ports
//     free (same port and protocol), memory and CPU requests within what the
//     node has left, and a free port in the dynamic range for every port 0;
//   - scores, in this order: spread (fewest pods of the same owner on the
//     node), least allocated (largest fraction of memory left after
//     placement), then node name.
//
// Before any of that, a pod must pass api.ValidateBindable (the unit rules
// and the template budget): one that does not fails with ErrInvalidPod,
// which the scheduling step records as Scheduled=False, reason InvalidPod,
// instead of binding a pod that could not be stored or rendered.
//
// A pod counts against a node when its spec.node names it and its phase is
// Scheduled, Starting or Running: Pending pods (even when pinned to a node by
// spec.node, as daemon pods are) and terminal ones (Lost, Failed, Succeeded)
// do not.
package scheduler
