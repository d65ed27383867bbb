# A bash session's interpreter: one shell that sources each run's /workspace/main.sh, so its
# working directory, variables, functions, options and background jobs carry over (languages.py
# starts it as `bash --norc --noprofile -c THIS main.sh`). PID 1 writes "RUN RESULT_CAP" for each
# run on fd 3; the shell answers on fd 4, the channel: the kernel puts the shell's own pid on
# each write, and PID 1 takes answers from that pid alone (no job, subshell or command the code
# started can answer for a run). SIGINT (PID 1's interrupt, sent to the shell's process group)
# ends the command in the foreground and the trap returns with 130 from main.sh, or from the
# function of the code that was running (code that goes on after that is ended with its
# session once the grace period passes, as Python code that catches KeyboardInterrupt). `exit`,
# or a failure under `set -e`, ends the shell and with it the session, as in any persistent
# shell. The code's own stdin is /dev/null; fds 3 and 4 are closed while it runs, though bash
# keeps copies of them for itself, which subshells and jobs inherit and exec'd programs do not.
# The code runs in this shell and can redefine what it uses (`builtin` itself, IFS, the traps):
# it can make its own session misreport, as a Python session's code can.
__scs_run_one() {
  builtin printf '.{"started":%s}' "$1" >&4
  builtin source /workspace/main.sh 3<&- 4>&- </dev/null
}
while :; do
  # IFS for this read only: the code may have set its own.
  IFS=' ' builtin read -r -u 3 __scs_run __scs_result_cap || {
    (( $? > 128 )) && continue  # a signal between runs
    builtin exit 0              # PID 1 closed the pipe
  }
  builtin trap 'builtin return 130 2>/dev/null' INT
  __scs_run_one "$__scs_run"
  __scs_status=$?
  builtin trap ':' INT
  builtin printf '.{"run":%s,"exit":{"code":%s}}' "$__scs_run" "$__scs_status" >&4
done
