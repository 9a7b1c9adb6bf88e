// Package clocktest provides a fake clock.Clock whose time moves only
// when a test says so, for tests of the work queue and of the controller
// runner.
package clocktest
