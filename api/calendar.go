package api

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxCalendarLength bounds a job's schedule (a systemd calendar event).
const MaxCalendarLength = 256

// calendarShorthands are the calendar events systemd names by a word
// (systemd.time(7), "Calendar Events").
var calendarShorthands = []string{
	"minutely", "hourly", "daily", "weekly", "monthly", "yearly", "annually", "quarterly", "semiannually",
}

// weekdayNames are the English weekday names systemd takes, short and
// long, in any case.
var weekdayNames = [7][2]string{
	{"mon", "monday"}, {"tue", "tuesday"}, {"wed", "wednesday"}, {"thu", "thursday"},
	{"fri", "friday"}, {"sat", "saturday"}, {"sun", "sunday"},
}

// ValidateCalendar checks s against systemd's calendar event syntax, the
// value of a timer's OnCalendar= (systemd.time(7)), and returns nil or an
// error saying what is wrong. It is a syntax check, written for herd (no
// served Go module parses systemd's calendar syntax): what it accepts,
// systemd 240 and later accept too; it may refuse a few exotic forms
// systemd also takes. Accepted:
//
//   - a shorthand: minutely, hourly, daily, weekly, monthly, yearly,
//     annually, quarterly, semiannually (any case);
//   - otherwise "[WEEKDAYS] [DATE] [TIME] [TIMEZONE]", at least a date or
//     a time, where
//   - WEEKDAYS is a comma list of English weekday names ("Mon" or
//     "Monday", any case) or ranges "Mon..Fri" (also "Mon-Fri");
//   - DATE is "YEAR-MONTH-DAY" or "MONTH-DAY", or with "~" before the day
//     ("*-02~01", counted from the month's end); TIME is "HOUR:MINUTE" or
//     "HOUR:MINUTE:SECOND", the second with an optional fraction ("5.5");
//   - each component is "*" or a comma list of values, ranges "A..B" and
//     repetitions "A/N", "A..B/N" or "*/N": years 1970–2199 (four digits),
//     months 1–12, days 1–31, hours 0–23, minutes and seconds 0–59, in one
//     or two digits;
//   - TIMEZONE is "UTC" or a time zone name such as "Europe/Berlin" (the
//     board must know it: systemd reads it from its own tz database).
//
// Nothing in it reaches a shell: the value is written to the timer file
// as is, and this check keeps out anything but these characters.
func ValidateCalendar(s string) error {
	if s == "" {
		return fmt.Errorf("empty calendar event")
	}
	if len(s) > MaxCalendarLength {
		return fmt.Errorf("longer than %d bytes", MaxCalendarLength)
	}
	for _, r := range s {
		if r < 0x20 || r >= 0x7f {
			return fmt.Errorf("contains %q: only printable ASCII is allowed", r)
		}
	}
	words := strings.Fields(s)
	if len(words) == 1 {
		for _, sh := range calendarShorthands {
			if strings.EqualFold(words[0], sh) {
				return nil
			}
		}
	}
	if len(words) > 4 {
		return fmt.Errorf("too many words: want [WEEKDAYS] [DATE] [TIME] [TIMEZONE], e.g. \"Mon..Fri *-*-* 03:00:00 UTC\"")
	}
	i := 0
	if i < len(words) && isWeekdayList(words[i]) {
		if err := checkWeekdays(words[i]); err != nil {
			return fmt.Errorf("weekdays %q: %w", words[i], err)
		}
		i++
	}
	hasDate, hasTime := false, false
	if i < len(words) && !strings.Contains(words[i], ":") && strings.ContainsAny(words[i], "-~") {
		if err := checkDate(words[i]); err != nil {
			return fmt.Errorf("date %q: %w", words[i], err)
		}
		hasDate = true
		i++
	}
	if i < len(words) && strings.Contains(words[i], ":") {
		if err := checkTime(words[i]); err != nil {
			return fmt.Errorf("time %q: %w", words[i], err)
		}
		hasTime = true
		i++
	}
	if i < len(words) {
		if !hasDate && !hasTime {
			return fmt.Errorf("%q is neither a shorthand (%s), weekdays, a date (YEAR-MONTH-DAY) nor a time (HOUR:MINUTE[:SECOND])",
				words[i], strings.Join(calendarShorthands, ", "))
		}
		if err := checkTimezone(words[i]); err != nil {
			return err
		}
		i++
	}
	if i < len(words) {
		return fmt.Errorf("unexpected %q after the time zone", words[i])
	}
	if !hasDate && !hasTime {
		return fmt.Errorf("a date (YEAR-MONTH-DAY) or a time (HOUR:MINUTE[:SECOND]) is needed after the weekdays")
	}
	return nil
}

// isWeekdayList reports whether w starts with a letter other than in a
// time zone-looking word: weekdays come first and are letters.
func isWeekdayList(w string) bool {
	if w == "" || !isLetter(w[0]) {
		return false
	}
	name := strings.ToLower(strings.FieldsFunc(w, func(r rune) bool { return r == ',' || r == '.' || r == '-' })[0])
	return weekdayIndex(name) >= 0
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func weekdayIndex(name string) int {
	name = strings.ToLower(name)
	for i, n := range weekdayNames {
		if name == n[0] || name == n[1] {
			return i
		}
	}
	return -1
}

func checkWeekdays(w string) error {
	for _, item := range strings.Split(w, ",") {
		lo, hi, isRange := strings.Cut(item, "..")
		if !isRange {
			lo, hi, isRange = strings.Cut(item, "-")
		}
		a := weekdayIndex(lo)
		if a < 0 {
			return fmt.Errorf("%q is not a weekday (Mon, Tue, ... or Monday, Tuesday, ...)", lo)
		}
		if isRange {
			b := weekdayIndex(hi)
			if b < 0 {
				return fmt.Errorf("%q is not a weekday (Mon, Tue, ... or Monday, Tuesday, ...)", hi)
			}
			if b < a {
				return fmt.Errorf("range %s..%s runs backwards (weeks start on Monday)", lo, hi)
			}
		}
	}
	return nil
}

// calendarField is one component's allowed values.
type calendarField struct {
	name     string
	min, max int
	digits   int // exact digits (years); 0: one or two
	fraction bool
}

var (
	fieldYear   = calendarField{name: "year", min: 1970, max: 2199, digits: 4}
	fieldMonth  = calendarField{name: "month", min: 1, max: 12}
	fieldDay    = calendarField{name: "day", min: 1, max: 31}
	fieldHour   = calendarField{name: "hour", min: 0, max: 23}
	fieldMinute = calendarField{name: "minute", min: 0, max: 59}
	fieldSecond = calendarField{name: "second", min: 0, max: 59, fraction: true}
)

func checkDate(w string) error {
	// The day may follow "~" (counted from the end of the month).
	parts := strings.Split(w, "-")
	last := parts[len(parts)-1]
	if m, d, tilde := strings.Cut(last, "~"); tilde {
		parts = append(parts[:len(parts)-1], m, d)
		if len(parts) < 2 {
			return fmt.Errorf("want YEAR-MONTH~DAY or MONTH~DAY")
		}
	}
	var fields []calendarField
	switch len(parts) {
	case 2:
		fields = []calendarField{fieldMonth, fieldDay}
	case 3:
		fields = []calendarField{fieldYear, fieldMonth, fieldDay}
	default:
		return fmt.Errorf("want YEAR-MONTH-DAY or MONTH-DAY, each a number, a range A..B, a list or *")
	}
	for i, p := range parts {
		if err := checkComponent(p, fields[i]); err != nil {
			return err
		}
	}
	return nil
}

func checkTime(w string) error {
	parts := strings.Split(w, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return fmt.Errorf("want HOUR:MINUTE or HOUR:MINUTE:SECOND")
	}
	fields := []calendarField{fieldHour, fieldMinute, fieldSecond}
	for i, p := range parts {
		if err := checkComponent(p, fields[i]); err != nil {
			return err
		}
	}
	return nil
}

// checkComponent checks "*" or a comma list of values, ranges and
// repetitions of one field.
func checkComponent(c string, f calendarField) error {
	if c == "" {
		return fmt.Errorf("empty %s", f.name)
	}
	for _, item := range strings.Split(c, ",") {
		if err := checkItem(item, f); err != nil {
			return err
		}
	}
	return nil
}

func checkItem(item string, f calendarField) error {
	base, step, hasStep := strings.Cut(item, "/")
	if hasStep {
		n, err := strconv.Atoi(step)
		if err != nil || n < 1 || len(step) > 4 {
			return fmt.Errorf("%s repetition %q: want a positive number after /", f.name, item)
		}
	}
	if base == "*" {
		return nil
	}
	lo, hi, isRange := strings.Cut(base, "..")
	a, err := calendarValue(lo, f)
	if err != nil {
		return err
	}
	if isRange {
		b, err := calendarValue(hi, f)
		if err != nil {
			return err
		}
		if b < a {
			return fmt.Errorf("%s range %q runs backwards", f.name, base)
		}
	}
	return nil
}

func calendarValue(v string, f calendarField) (float64, error) {
	num := v
	frac := ""
	if f.fraction {
		num, frac, _ = strings.Cut(v, ".")
	}
	bad := num == "" || strings.Trim(num, "0123456789") != "" ||
		(f.digits > 0 && len(num) != f.digits) || (f.digits == 0 && len(num) > 2) ||
		(strings.Contains(v, ".") && f.fraction && (frac == "" || len(frac) > 6 || strings.Trim(frac, "0123456789") != ""))
	if bad {
		want := "one or two digits"
		if f.digits > 0 {
			want = fmt.Sprintf("%d digits", f.digits)
		}
		return 0, fmt.Errorf("%s %q: want %s, a range A..B, a repetition A/N or *", f.name, v, want)
	}
	n, _ := strconv.Atoi(num)
	if n < f.min || n > f.max {
		return 0, fmt.Errorf("%s %d is out of range %d..%d", f.name, n, f.min, f.max)
	}
	return float64(n), nil
}

// checkTimezone checks the optional last word: UTC or a tz database name.
func checkTimezone(w string) error {
	if strings.EqualFold(w, "UTC") {
		return nil
	}
	for _, part := range strings.Split(w, "/") {
		if part == "" || part == "." || part == ".." || strings.Trim(part, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+-") != "" || !isLetter(part[0]) {
			return fmt.Errorf("%q is not a time zone (UTC, or a name such as Europe/Berlin)", w)
		}
	}
	return nil
}
