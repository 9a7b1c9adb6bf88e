package api

import (
	"strings"
	"testing"
)

func TestValidateCalendar(t *testing.T) {
	good := []string{
		"daily", "Hourly", "minutely", "weekly", "monthly", "yearly", "annually", "quarterly", "semiannually",
		"*-*-* 03:00:00",
		"*-*-* 3:0:0",
		"*:*:0/5",
		"*:0/15",
		"03:00",
		"Mon *-*-* 00:00:00",
		"Mon..Fri 08:30",
		"mon-fri 08:30",
		"Sat,Sun 10:00",
		"Monday,Wednesday..Friday 12:00:00",
		"*-*-01",
		"2026-12-24 18:00:00",
		"2026..2030-01,07-01 00:00",
		"*-02~01 23:59:59",
		"*-*~03",
		"*-*-* 00/2:00:00",
		"*-*-* 1..5/2:00",
		"*-*-* 12:00:30.5",
		"*-*-* 03:00:00 UTC",
		"*-*-* 03:00:00 Europe/Berlin",
		"03:00 America/Argentina/Buenos_Aires",
		"*-*-* Etc/GMT-3",
		"  *-*-*   03:00:00  ",
	}
	for _, s := range good {
		if err := ValidateCalendar(s); err != nil {
			t.Errorf("ValidateCalendar(%q) = %v, want nil", s, err)
		}
	}
	bad := []struct{ in, want string }{
		{"", "empty"},
		{"sometimes", "neither a shorthand"},
		{"Mon", "a date (YEAR-MONTH-DAY) or a time"},
		{"Fri..Mon 03:00", "runs backwards"},
		{"Mon..Funday 03:00", `"Funday" is not a weekday`},
		{"*-*-* 24:00:00", "hour 24 is out of range 0..23"},
		{"*-*-* 03:60", "minute 60 is out of range"},
		{"*-*-* 03:00:61", "second 61 is out of range"},
		{"*-13-01", "month 13 is out of range"},
		{"*-*-32", "day 32 is out of range"},
		{"26-01-01", "year \"26\": want 4 digits"},
		{"1969-01-01", "year 1969 is out of range"},
		{"*-*-* 3:00:00:00", "want HOUR:MINUTE or HOUR:MINUTE:SECOND"},
		{"*-*-* 03", "\"03\" is not a time zone"},
		{"*:*:*/0", "want a positive number after /"},
		{"*:*:0/x", "want a positive number after /"},
		{"*-*-* 05..01:00", "runs backwards"},
		{"*-*-* 003:00", "want one or two digits"},
		{"*-*-* 03:00:00 Mars/Base$", "not a time zone"},
		{"*-*-* 03:00:00 UTC extra", "unexpected"},
		{"*-*-* 03:00:00;reboot", "want one or two digits"},
		{"*-*-* 03:00:00\n", "only printable ASCII"},
		{"*-*-* 03:00:00 %n", "not a time zone"},
		{"a b c d e", "too many words"},
		{strings.Repeat("1", 300), "longer than"},
		{"*-*-* 03:00:5.", "want one or two digits"},
		{"*-*-*-* 03:00", "want YEAR-MONTH-DAY"},
		{"*-*-* ,:00", "want one or two digits"},
	}
	for _, c := range bad {
		err := ValidateCalendar(c.in)
		if err == nil {
			t.Errorf("ValidateCalendar(%q) = nil, want an error with %q", c.in, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("ValidateCalendar(%q) = %q, want it to contain %q", c.in, err, c.want)
		}
	}
}
