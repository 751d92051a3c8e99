package policies

// The destructive-command rule set used by the embedded default configuration. Each rule
// looks at every string of a tool call's input (and argv arrays joined by spaces), so it
// covers Bash {"command": ...}, exec-style tools {"command": ["bash", "-lc", ...]} and
// SQL tools alike. The expressions aim at commands that wreck a machine, a repository's
// main branch or a database, not at ordinary cleanups: `rm -rf ./build`, `git push
// --force origin feature`, `chmod -R 755 ./dist` and `curl ... | jq` pass.

// cmdStart anchors a shell command: the start of a line, after ; & | ( { ` or $(, or as
// the script of `sh -c '...'`, optionally behind sudo/doas/exec/nohup/command/xargs/time/
// env and environment assignments. Words merely mentioned in an echo, grep or commit
// message are not at a command start and are not matched. The patterns use [ \t] rather
// than \s, and multi-line ^ and $, so that no match spans a line break: they are then
// evaluated only on the lines that hold their key word (see pattern.go).
const cmdStart = `(?:(?m:^)|[;&|({` + "`" + `]|\$\(|\b(?:ba|z|k|da)?sh[ \t]+(?:-[A-Za-z]+[ \t]+)*-[A-Za-z]*c[ \t]+["']?)[ \t]*` +
	`(?:(?:(?:sudo|doas|exec|nohup|command|xargs|time|env)(?:[ \t]+-[^\s;&|]+)*|[A-Za-z_][A-Za-z0-9_]*=[^\s;&|]*)[ \t]+)*`

// argEnd ends a shell word.
const argEnd = `(?:(?m:$)|[ \t;&|)"'` + "`" + `])`

// forceFlag is a git push option that overwrites the remote branch.
const forceFlag = `(?:--force(?:-with-lease)?(?:=[^\s;&|]*)?|-f)`

// DefaultDestructive returns the destructive-command rules (a fresh copy each call). They
// match, in any string of any tool's input:
//
//   - rm_recursive_root: rm with -r/-R/--recursive (any other flags) whose target list
//     includes /, /*, ~, ~/, ~/*, $HOME, ${HOME} (and /* forms) or a bare *. Not matched:
//     rm -rf ./build, rm -rf /tmp/x, rm -rf ~/.cache/x, rm -rf *.o, rm without -r.
//   - mkfs: mkfs, mkfs.<type>, mke2fs, wipefs as a command.
//   - raw_disk_write: dd ... of=/dev/<disk> and shell redirection > /dev/<disk>, for sd*,
//     hd*, vd*, xvd*, nvme*, mmcblk*, disk*/rdisk* (macOS), md*, dm-*, mapper/*, loop*.
//     /dev/null, /dev/zero and /dev/stdout are not disks.
//   - fork_bomb: a shell function whose body pipes a call into a background call,
//     :(){ :|:& };: and its named variants.
//   - git_force_push_main: git push with --force, -f, --force-with-lease or a +refspec,
//     whose destination is main or master (origin main, HEAD:main, refs/heads/master).
//     A force push without an explicit main/master destination is not matched (the
//     current branch is unknown to the proxy).
//   - chmod_777_root: chmod 777 / a+rwx / ugo+rwx / a=rwx on / or /* (recursive or not).
//   - curl_pipe_shell: curl/wget output piped into sh, bash, zsh, ksh, dash, fish, or run
//     through sh -c "$(curl ...)" or bash <(curl ...). Pipes into jq, tee, python, shasum
//     are not matched.
//   - shutdown_reboot: shutdown, reboot, halt, poweroff, init 0/6 as a command, and
//     systemctl reboot/poweroff/halt/kexec.
//   - sql_drop: DROP DATABASE/SCHEMA/TABLE (any case) as the start of a string (a query
//     argument of a SQL tool) or passed to a SQL client (psql, mysql, mariadb, sqlite3,
//     sqlcmd, clickhouse-client, cockroach sql, duckdb). A migration file written by an
//     editing tool whose text does not start with DROP is not matched.
func DefaultDestructive() []ToolRule {
	const code = "hookproxy.tools.destructive"
	return []ToolRule{
		{
			Name:     "rm_recursive_root",
			Argument: "*",
			Pattern: cmdStart + `rm[ \t]+(?:-[^\s;&|]+[ \t]+)*?(?:-[A-Za-z]*[rR][A-Za-z]*|--recursive)[ \t]+` +
				`(?:[^\s;&|]+[ \t]+)*?["']?(?:/\*?|~/?\*?|\$HOME/?\*?|\$\{HOME\}/?\*?|\*)["']?` + argEnd,
			Reason: "Recursive deletion of the root directory, the home directory or everything in the working directory is blocked.",
			Code:   code,
		},
		{
			Name:     "mkfs",
			Argument: "*",
			Pattern:  cmdStart + `(?:mkfs(?:\.[A-Za-z0-9]+)?|mke2fs|wipefs)` + argEnd,
			Reason:   "Creating or wiping a filesystem is blocked.",
			Code:     code,
		},
		{
			Name:     "raw_disk_write",
			Argument: "*",
			Pattern: `(?:\bdd[ \t]+(?:[^\s;&|]+[ \t]+)*?of=|(?:(?m:^)|[^>&0-9\n])>[ \t]*)` +
				`/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme[0-9]|mmcblk[0-9]|r?disk[0-9]|md[0-9]|dm-[0-9]|mapper/|loop[0-9])`,
			Reason: "Writing directly to a disk device is blocked.",
			Code:   code,
		},
		{
			Name:     "fork_bomb",
			Argument: "*",
			Pattern: `(?:[A-Za-z_][A-Za-z0-9_]*|:)[ \t]*\([ \t]*\)[ \t]*\{[ \t]*(?:[A-Za-z_][A-Za-z0-9_]*|:)[ \t]*\|` +
				`[ \t]*(?:[A-Za-z_][A-Za-z0-9_]*|:)[ \t]*&[ \t]*;?[ \t]*\}`,
			Reason: "A fork bomb is blocked.",
			Code:   code,
		},
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
			Name:     "chmod_777_root",
			Argument: "*",
			Pattern: cmdStart + `chmod[ \t]+(?:-[^\s;&|]+[ \t]+)*(?:0?777|a\+rwx|ugo\+rwx|a=rwx)[ \t]+(?:-[^\s;&|]+[ \t]+)*` +
				`["']?/\*?["']?` + argEnd,
			Reason: "Making the whole filesystem world-writable is blocked.",
			Code:   code,
		},
		{
			Name:     "curl_pipe_shell",
			Argument: "*",
			Pattern: `\b(?:curl|wget)\b[^;&\n]*?\|[ \t]*(?:(?:sudo|doas)(?:[ \t]+-[^\s;&|]+)*[ \t]+)?(?:ba|z|k|da|fi)?sh\b(?:(?m:$)|[^.\w\n-])` +
				`|\b(?:ba|z|k|da)?sh[ \t]+(?:-[A-Za-z]+[ \t]+)*-[A-Za-z]*c[ \t]+["']?\$\([ \t]*(?:curl|wget)\b` +
				`|\b(?:ba|z|k|da)?sh[ \t]+<\([ \t]*(?:curl|wget)\b`,
			Reason: "Piping a downloaded script into a shell is blocked.",
			Code:   code,
		},
		{
			Name:     "shutdown_reboot",
			Argument: "*",
			Pattern:  cmdStart + `(?:shutdown|reboot|halt|poweroff|init[ \t]+[06])` + argEnd + `|\bsystemctl[ \t]+(?:reboot|poweroff|halt|kexec)\b`,
			Reason:   "Shutting down or rebooting the machine is blocked.",
			Code:     code,
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
