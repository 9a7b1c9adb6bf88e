// Package backoff holds herd's retry arithmetic, once: a delay that doubles
// after each failure up to a cap (Double, for the work queue, the placer,
// the SSH executor's dials, the service proxy and view, artifact fetches,
// job retries and the Go client), and a period stretched by a random
// fraction so that many timers do not fire together (Stretch). Both are
// pure: the caller brings the failure count and the random number.
package backoff
