package api

import (
	"fmt"
	"io/fs"
	"net/url"
	"strings"
)

// Artifact is a file a pod's board downloads itself before the process
// starts: a binary or data file too big for PodTemplate.Files. The board's
// agent fetches URL, checks the bytes against SHA256, keeps them in its
// cache (by hash, across reboots) and places them at Path with Mode, never
// following a symbolic link. A download that does not match, or a URL that
// cannot be reached, keeps the process from starting and shows as the
// pod's ArtifactsFetched condition.
type Artifact struct {
	// URL is http:// or https://, at most MaxArtifactURL bytes, printable
	// ASCII, without user:password@. It is stored in the state and written
	// into the (world-readable) unit file: it must not carry a secret.
	URL string `json:"url" toml:"url"`
	// SHA256 is the file's SHA-256, 64 lower-case hex digits. Plain http is
	// allowed because the bytes are checked against it.
	SHA256 string `json:"sha256" toml:"sha256"`
	// Path is where the file goes on the board: absolute, clean, not a
	// path of Files or of another artifact, not under herd's own
	// directories (HerdDirs).
	Path string `json:"path" toml:"path"`
	// Mode is an octal permission string such as "0755". Default
	// DefaultArtifactMode. The setuid and setgid bits need AllowSetID.
	Mode string `json:"mode,omitempty" toml:"mode,omitempty"`
	// AllowSetID permits a Mode with the setuid or setgid bit.
	AllowSetID bool `json:"allowSetID,omitempty" toml:"allow_setid,omitempty"`
}

// Limits and defaults of artifacts.
const (
	// MaxArtifacts is the most artifacts one template may have.
	MaxArtifacts = 16
	// MaxArtifactURL is the longest artifact URL, in bytes.
	MaxArtifactURL = 1024
	// MaxArtifactSize is the largest file a board downloads for an
	// artifact; a longer body fails the fetch.
	MaxArtifactSize = 512 << 20
	// DefaultArtifactMode is an artifact's mode when the manifest gives
	// none: artifacts are mostly programs.
	DefaultArtifactMode = "0755"
)

// HerdDirs are the board directories herd owns: its configuration, its
// state (the artifact cache included) and its runtime files. No artifact
// may be placed in them.
var HerdDirs = []string{"/etc/herd", "/var/lib/herd", "/run/herd"}

// HerdBinary is the agent binary on a board, which runs artifact fetches
// (`herd artifact fetch`); no artifact may replace it.
const HerdBinary = "/usr/local/bin/herd"

// Perm returns the artifact's mode as an fs.FileMode (permission bits plus
// setuid, setgid and sticky), the empty Mode being DefaultArtifactMode. A
// mode that is not an octal permission string is an error; Validate
// refuses such an artifact at admission.
func (a Artifact) Perm() (fs.FileMode, error) {
	s := a.Mode
	if s == "" {
		s = DefaultArtifactMode
	}
	return File{Path: a.Path, Mode: s}.Perm()
}

// IsSHA256 reports whether s is 64 lower-case hex digits.
func IsSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ArtifactURLProblem returns why u is not an artifact URL, or "". The
// board's fetcher calls it too, on every redirect it follows.
func ArtifactURLProblem(u string) string {
	if len(u) > MaxArtifactURL {
		return fmt.Sprintf("is %d bytes; at most %d", len(u), MaxArtifactURL)
	}
	for i := 0; i < len(u); i++ {
		if u[i] <= ' ' || u[i] >= 0x7f {
			return "must be printable ASCII without spaces (percent-encode the rest)"
		}
	}
	pu, err := url.Parse(u)
	switch {
	case err != nil:
		return "is not a URL: " + strings.TrimPrefix(err.Error(), "parse "+fmt.Sprintf("%q", u)+": ")
	case pu.Scheme != "http" && pu.Scheme != "https":
		return "must start with http:// or https://"
	case pu.User != nil:
		return "must not carry a user name or password: the URL is stored and written into a world-readable unit file"
	case pu.Host == "" || pu.Hostname() == "":
		return "has no host"
	case pu.Opaque != "":
		return "must be http://HOST/PATH or https://HOST/PATH"
	}
	return ""
}

// underHerdDir reports whether p is one of HerdDirs, under one, or the
// herd binary.
func underHerdDir(p string) (string, bool) {
	if p == HerdBinary {
		return HerdBinary, true
	}
	for _, d := range HerdDirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return d, true
		}
	}
	return "", false
}

// artifacts checks a template's artifacts: at most MaxArtifacts, each with
// a valid URL and SHA-256, a path like a pod file's (absolute, clean, that
// fits on an ExecStartPre line, not under /tmp for a sandboxed template)
// that no file or other artifact uses and that is not herd's, and a mode
// like a pod file's.
func (v *validator) artifacts(p fieldPath, t *PodTemplate) {
	if len(t.Artifacts) > MaxArtifacts {
		v.addf(p, "%d artifacts; a template may have at most %d", len(t.Artifacts), MaxArtifacts)
		return
	}
	files := make(map[string]int, len(t.Files))
	for i, f := range t.Files {
		files[f.Path] = i
	}
	seen := make(map[string]int, len(t.Artifacts))
	for i, a := range t.Artifacts {
		ip := p.index(i)
		up := ip.field("url", "url")
		if a.URL == "" {
			v.addf(up, "required: where the board downloads the file, an http:// or https:// URL")
		} else if msg := ArtifactURLProblem(a.URL); msg != "" {
			shown := a.URL
			if pu, err := url.Parse(a.URL); err == nil {
				shown = pu.Redacted() // no password in an error
			}
			v.addf(up, "%q %s", truncate(shown, 80), msg)
		}
		hp := ip.field("sha256", "sha256")
		switch {
		case a.SHA256 == "":
			v.addf(hp, "required: the file's SHA-256 (64 lower-case hex digits, as sha256sum prints it)")
		case !IsSHA256(a.SHA256):
			v.addf(hp, "%q: must be 64 lower-case hex digits, as sha256sum prints it", truncate(a.SHA256, 80))
		}
		pp := ip.field("path", "path")
		switch {
		case a.Path == "":
			v.addf(pp, "required: where to place the file, an absolute path")
		case a.Path == "/":
			v.addf(pp, "\"/\" is a directory")
		case v.absPath(pp, a.Path):
			if d, ok := underHerdDir(a.Path); ok {
				v.addf(pp, "%q is herd's own (%s): place the artifact elsewhere", a.Path, d)
			} else if j, dup := files[a.Path]; dup {
				v.addf(pp, "%q is also the path of files[%d]", a.Path, j)
			} else if j, dup := seen[a.Path]; dup {
				v.addf(pp, "duplicate artifact path %q (also artifacts[%d])", a.Path, j)
			} else {
				seen[a.Path] = i
			}
			if n := len(QuoteUnitWord(a.Path, artifactQuoting)); n > filesWordMax || n > execStartWordMax {
				v.addf(pp, "is %d bytes once quoted; an artifact path may take at most %d (one unit file line)", n, min(filesWordMax, execStartWordMax))
			}
			if t.Sandbox != SandboxNone {
				for _, tmp := range []string{"/tmp", "/var/tmp"} {
					if strings.HasPrefix(a.Path, tmp+"/") {
						v.addf(pp, "%q is under %s, which a sandboxed process does not see (PrivateTmp=yes): place it elsewhere or set sandbox = \"none\"", a.Path, tmp)
					}
				}
			}
		}
		mp := ip.field("mode", "mode")
		mode := a.Mode
		if mode == "" {
			mode = DefaultArtifactMode
		}
		if m, ok := parseFileMode(mode); !ok {
			v.addf(mp, "%q: must be an octal permission string such as \"0755\", at most \"07777\"", a.Mode)
		} else if m&0o6000 != 0 && !a.AllowSetID {
			v.addf(mp, "%q sets the setuid or setgid bit on %s: set allow_setid = true on this artifact to allow it", a.Mode, a.Path)
		}
	}
}

// artifactQuoting is how the renderer quotes an artifact's words in
// ExecStartPre= (specifiers and variables are not expanded).
var artifactQuoting = UnitQuoting{Percent: true, Dollar: true}

// ArtifactQuoting returns how package units quotes the words of an
// artifact's ExecStartPre= line: % as %% and every $ as $$.
func ArtifactQuoting() UnitQuoting { return artifactQuoting }

// truncate shortens s to at most n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// defaultArtifacts fills in and normalizes the artifacts' modes.
func defaultArtifacts(t *PodTemplate) {
	for i := range t.Artifacts {
		a := &t.Artifacts[i]
		if a.Mode == "" {
			a.Mode = DefaultArtifactMode
		} else if m, ok := parseFileMode(a.Mode); ok {
			a.Mode = formatFileMode(m)
		}
	}
}
