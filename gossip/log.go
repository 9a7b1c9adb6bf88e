package gossip

import (
	"context"
	"log"
	"log/slog"
	"strings"
)

// slogWriter adapts memberlist's *log.Logger output ("[LEVEL] memberlist:
// message") into slog records at debug level, keeping memberlist's own
// level as the memberlistLevel attribute. memberlist's ERR/WARN lines are
// routine on a fleet where boards come and go (failed pings to a dead
// board), so they stay at debug; what matters is reported by this package.
type slogWriter struct {
	log *slog.Logger
}

func newMemberlistLogger(l *slog.Logger) *log.Logger {
	return log.New(slogWriter{log: l}, "", 0)
}

// Write implements io.Writer; log.Logger calls it once per line.
func (w slogWriter) Write(p []byte) (int, error) {
	if !w.log.Enabled(context.Background(), slog.LevelDebug) {
		return len(p), nil
	}
	msg, level := parseMemberlistLine(string(p))
	w.log.Debug(msg, "memberlistLevel", level)
	return len(p), nil
}

// parseMemberlistLine splits "[WARN] memberlist: text\n" into ("text",
// "WARN"). Lines of another shape are returned whole with level "".
func parseMemberlistLine(s string) (msg, level string) {
	s = strings.TrimRight(s, "\r\n")
	if strings.HasPrefix(s, "[") {
		if end := strings.IndexByte(s, ']'); end > 0 {
			level = s[1:end]
			s = strings.TrimSpace(s[end+1:])
		}
	}
	s = strings.TrimPrefix(s, "memberlist: ")
	return s, level
}
