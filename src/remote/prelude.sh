# fleetctl probe prelude: shared by every read-only script fleetctl runs on a
# node. Output is a series of sections, read by crate::node::parse:
#
#   @@fleetctl:begin NAME[ ARGUMENT]@@
#   <stdout of the command, byte for byte>
#   (one newline added here, so the next marker starts a line)
#   @@fleetctl:stderr@@
#   <stderr of the command>
#   @@fleetctl:end EXIT_STATUS@@
#
# No probe can stop the script: each runs on its own, and a failure is just an
# exit status and a stderr in its section. These scripts contain no single
# quote, so wrapping them in single quotes for sudo sh -c never breaks them.

LC_ALL=C
export LC_ALL
PATH=/usr/sbin:/usr/bin:/sbin:/bin:/opt/bin:$PATH
export PATH

# A tool that hangs (a stuck D-Bus call, an API server that never answers)
# must not hang the whole gathering.
fleetctl_timeout=""
if command -v timeout >/dev/null 2>&1; then
	fleetctl_timeout="timeout 20"
fi

# probe NAME COMMAND [ARGS...]: runs COMMAND with its stdout streamed into the
# section and its stderr captured for the section footer.
probe() {
	fleetctl_name=$1
	shift
	printf "@@fleetctl:begin %s@@\n" "$fleetctl_name"
	{ fleetctl_err=$( { "$@" 1>&3 3>&-; } 2>&1 ); fleetctl_rc=$?; } 3>&1
	printf "\n@@fleetctl:stderr@@\n"
	if [ -n "$fleetctl_err" ]; then
		printf "%s\n" "$fleetctl_err"
	fi
	printf "@@fleetctl:end %s@@\n" "$fleetctl_rc"
}
