package policies

// The destructive-command rule set used by the embedded default configuration. The effect
// rules look at the evaluated commands of a tool call's command keys, so they cover Bash
// {"command": ...}, exec-style tools {"command": ["bash", "-lc", ...]}, {"cmd": ...}
// and shell_call {"commands": [...]} alike; the two expression rules at every string, so
// they also cover SQL tools. The rules aim at commands that wreck a machine, a repository's
// main branch or a database, not at ordinary cleanups: `rm -rf ./build`, `git push
// --force origin feature`, `chmod -R 755 ./dist` and `curl ... | jq` pass.

// argEnd ends a shell word.
const argEnd = `(?:(?m:$)|[ \t;&|)"'` + "`" + `])`

// forceFlag is a git push option that overwrites the remote branch.
const forceFlag = `(?:--force(?:-with-lease)?(?:=[^\s;&|]*)?|-f)`

// DefaultDestructive returns the destructive-command rules (a fresh copy each call). The
// first seven are effects matched on the evaluated commands of the call's command keys
// (however spelled: quoted, escaped, behind wrappers, in nested shells — see
// tools_shell.go); the last two are expressions over every string of the input:
//
//   - recursive-delete: rm -r/-R/--recursive (abbreviations included), find -delete, find
//     -exec rm/unlink/shred, rmdir -p, shred, git clean -f, rsync --delete, whose target
//     is protected: /, ~, a system directory (anything directly under /, and directly
//     under /usr, /var, /etc, /home, ...), the working directory or a parent (., .., *,
//     ./*), or a glob over one of those (/*, ~/*). Not matched: rm -rf ./build, rm -rf
//     /tmp/x, rm -rf ~/.cache/x, rm -rf *.o, rm without -r.
//   - block-device-write: a redirection to /dev/<disk>, dd of=/dev/<disk>, tee/cp/shred to
//     one, for sd*, hd*, vd*, xvd*, nvme*, mmcblk*, disk*/rdisk* (macOS), md*, dm-*,
//     mapper/*, loop*. /dev/null, /dev/zero and /dev/stdout are not disks.
//   - mkfs: mkfs, mkfs.<type>, mke2fs, wipefs, mkswap on a disk.
//   - permissions-root: chmod/chown/chgrp -R on /, a system or a home directory, and
//     chmod 777 (or a+rwx, o+w) of / itself.
//   - fork-bomb: a shell function that calls itself into a pipe or the background.
//   - pipe-to-shell: a download run as code: curl/wget output piped into a shell, or run
//     through sh -c "$(curl ...)" or bash <(curl ...).
//   - shutdown: shutdown, reboot, halt, poweroff, init 0/6, systemctl reboot/poweroff/...
//   - git_force_push_main: git push with --force, -f, --force-with-lease or a +refspec,
//     whose destination is main or master (origin main, HEAD:main, refs/heads/master).
//     A force push without an explicit main/master destination is not matched (the
//     current branch is unknown to the proxy).
//   - sql_drop: DROP DATABASE/SCHEMA/TABLE (any case) as the start of a string (a query
//     argument of a SQL tool) or passed to a SQL client (psql, mysql, mariadb, sqlite3,
//     sqlcmd, clickhouse-client, cockroach sql, duckdb). A migration file written by an
//     editing tool whose text does not start with DROP is not matched.
func DefaultDestructive() []ToolRule {
	const code = "hookproxy.tools.destructive"
	return []ToolRule{
		{Name: "recursive-delete", Effect: "recursive-delete", Targets: "protected", Code: code,
			Reason: "Recursive deletion of the root, a system or home directory, or the whole working directory is blocked."},
		{Name: "block-device-write", Effect: "block-device-write", Code: code,
			Reason: "Writing directly to a disk device is blocked."},
		{Name: "mkfs", Effect: "mkfs", Code: code, Reason: "Creating or wiping a filesystem is blocked."},
		{Name: "permissions-root", Effect: "permissions-root", Code: code,
			Reason: "Changing permissions or ownership of the whole filesystem or a system directory is blocked."},
		{Name: "fork-bomb", Effect: "fork-bomb", Code: code, Reason: "A fork bomb is blocked."},
		{Name: "pipe-to-shell", Effect: "pipe-to-shell", Code: code, Reason: "Piping a downloaded script into a shell is blocked."},
		{Name: "shutdown", Effect: "shutdown", Code: code, Reason: "Shutting down or rebooting the machine is blocked."},
		{
			Name:     "git_force_push_main",
			Argument: "*",
			Pattern: `\bgit\b[^;&|\n]*?[ \t]push\b[^;&|\n]*?(?:` +
				`[ \t]` + forceFlag + `(?:[ \t][^;&|\n]*?)?[ \t:+](?:refs/heads/)?(?:main|master)` + argEnd +
				`|[ \t:](?:refs/heads/)?(?:main|master)(?:[ \t][^;&|\n]*?)?[ \t]` + forceFlag + argEnd +
				`|[ \t]\+(?:[^\s;&|:]*:)?(?:refs/heads/)?(?:main|master)` + argEnd + `)`,
			Reason: "Force-pushing to main or master is blocked.",
			Code:   code,
		},
		{
			// Begins with \A-style ^: the whole argument must start with the statement, so
			// this one is evaluated on the whole string (after its "drop" prefilter).
			Name:     "sql_drop",
			Argument: "*",
			Pattern:  `(?i)(?:^\s*|\b(?:psql|mysql|mariadb|sqlite3|sqlcmd|clickhouse-client|cockroach\s+sql|duckdb)\b[^|;&\n]*?["'\s])drop\s+(?:database|schema|table)\b`,
			Reason:   "Dropping a database, schema or table is blocked.",
			Code:     code,
		},
	}
}
