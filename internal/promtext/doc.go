// Package promtext writes herd's metrics in the Prometheus text
// exposition format 0.0.4 without client_golang, which with protobuf
// cost each agent about 2 MB of binary and of RSS.
//
// It has what herd needs and nothing more: a Registry per agent (never a
// global one) holding counter vectors, histogram vectors with fixed
// buckets, constant gauges and collect functions called at scrape time
// for the families they declare; the Go runtime and process families
// (go_*, process_*; process_* on Linux only); and an http.Handler.
// Families are written sorted by name with # HELP and # TYPE once each,
// series sorted by label values, label names sorted within a series.
package promtext
