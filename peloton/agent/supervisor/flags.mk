# How the per-task supervisor is built: read by the Makefile (`make setup`) and by the agent
# when it has to compile the supervisor itself (peloton/agent/launcher.py), so both build the
# same binary.  Warnings are errors; hardening as Debian's hardening-wrapper applies it
# (fortified libc calls, stack protector and clash protection, CET, PIE, full RELRO).
SUPERVISOR_CFLAGS := -O2 -Wall -Wextra -Werror -Wformat=2 -Wformat-security -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fstack-clash-protection -fcf-protection -fPIE
# A static binary execs faster (no dynamic loader per task); dynamic where there is no libc.a.
SUPERVISOR_LDFLAGS_STATIC := -static-pie -Wl,-z,relro,-z,now
SUPERVISOR_LDFLAGS_DYNAMIC := -pie -Wl,-z,relro,-z,now
# The AddressSanitizer/UndefinedBehaviorSanitizer build `make test` runs the agent tests over.
SUPERVISOR_SANITIZE_FLAGS := -O1 -g -Wall -Wextra -Werror -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
