// Package boardfs is the board side of herd's file placement: the code
// behind `herd board put-file` and `herd board rm-file`, which the leader
// runs on a board (as root, through sshexec's wrapper, argv as data) to
// write and remove pod files, unit files and env files.
//
// Pod files live in directories a pod's user may be able to write. A root
// process that resolves such a path normally would follow a symbolic link
// the user planted in any component (or swapped in between a check and the
// write) and write or delete anywhere. Here every path is walked from "/"
// one component at a time with openat(O_NOFOLLOW|O_DIRECTORY) relative to
// the directory opened before, so no link is ever followed: a link (or a
// non-directory) where a directory is expected is refused with ErrRefused
// and nothing changes. The write itself creates a temporary file in the
// final directory (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600, fchmod'ed to the
// wanted mode before any byte, fsync'ed) and renameat's it over the last
// component, so a link or hard link at the path is replaced, never written
// through, and readers see the old file or the new one. Removal is
// unlinkat relative to the walked directory, which removes a link itself.
// There is no check-then-act step a racing user could exploit: the
// descriptor checked is the one used.
//
// setuid and setgid bits are refused unless PutOptions.AllowSetID is set
// (the template's allow_setid); admission refuses them too.
//
// Content reaches put-file through a staged file (the wrapper gives
// commands /dev/null as stdin) that sshexec writes over SFTP in a root-only
// directory; put-file reads it without following links and removes it.
package boardfs
