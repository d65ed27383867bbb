# A bash session's interpreter: one shell that sources each run's /workspace/main.sh at its top
# level, as if the code were typed at a prompt: `declare`, `typeset`, `readonly`, `export` and
# plain assignments make globals, and the working directory, functions, aliases (the code turns
# on expand_aliases, as any non-interactive shell must), traps, options and background jobs carry
# over (languages.py starts it as `bash --norc --noprofile -c THIS main.sh`, each placeholder of
# THIS, a name between two at signs, replaced by that name's value in scs_launcher/channel.py,
# which writes the channel's grammar). PID 1 writes "RUN RESULT_CAP [STDIN]" for each run on
# fd 3 (COMMAND_FD): STDIN, when the run has one, is a file PID 1 wrote and removes when the run
# ends (session.py's stdin_file); otherwise the code reads /dev/null. The shell answers on fd 4
# (ANSWER_FD), the channel, each answer in one record (LAST): the kernel puts the shell's own
# pid on each write, and PID 1 takes answers from that pid alone (no job, subshell or command
# the code started can answer for a run). SIGINT (PID 1's interrupt, sent to the shell's process
# group) ends the command in the foreground and the trap returns with 130 from main.sh, or from
# the function of the code that was running (code that goes on after that is ended with its
# session once the grace period passes, as Python code that catches KeyboardInterrupt). `exit`,
# or a failure under `set -e`, ends the shell and with it the session, as a terminal closes
# with its shell; the run's report has the exit code and says the session is over. fds 3 and 4
# are closed while the code runs, though bash keeps copies of them for itself, which subshells
# and jobs inherit and exec'd programs do not. The code runs in this shell and can redefine
# what it uses (`builtin` itself, IFS, the traps, the __scs_ names): it can make its own
# session misreport, as a Python session's code can.
while :; do
  # IFS for this read only: the code may have set its own.
  IFS=' ' builtin read -r -u 3 __scs_run __scs_result_cap __scs_stdin || {
    (( $? > 128 )) && continue  # a signal between runs
    builtin exit 0              # PID 1 closed the pipe
  }
  builtin trap 'builtin return 130 2>/dev/null' INT
  builtin printf '@LAST@{"started":%s}' "$__scs_run" >&4
  # At the top level, not in a function: a function's `declare` would make locals.
  builtin source /workspace/main.sh 3<&- 4>&- <"${__scs_stdin:-/dev/null}"
  __scs_status=$?
  builtin trap ':' INT
  builtin printf '@LAST@{"run":%s,"exit":{"code":%s}}' "$__scs_run" "$__scs_status" >&4
done
