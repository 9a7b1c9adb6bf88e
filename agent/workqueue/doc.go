// Package workqueue owns the controllers' work queue: a de-duplicating,
// rate-limited queue of string keys in the spirit of client-go's, with an
// injectable clock.Clock so tests drive time without sleeping. It is its
// own package because two loops use it, the controller Runner and the
// placer's workers, and neither should import the other.
//
// A key is at most once in the queue however often it is added, and never
// handed to two workers at once: a key added while it is being processed is
// queued again when its worker calls Done. Failures are retried with
// AddRateLimited: a per-key exponential backoff (5 ms doubling up to 30 s by
// default, reset by Forget) combined with an overall token bucket
// (golang.org/x/time/rate) so a storm of failing keys cannot make a hot loop.
package workqueue
