#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Fail if a compiled C++ core object steps outside the kernel-safe subset:
# C++ runtime references (operator new/delete, exceptions, RTTI, static-init
# guards, atexit) or sections the kernel never runs or never loads (global
# constructors/destructors, exception tables, thread-locals).
#
#   check-freestanding.sh OBJECT
set -eu
obj=$1
status=0

undef=$(nm -u "$obj" | awk '{print $2}')
bad_syms=$(printf '%s\n' "$undef" | grep -E \
	'^(_Znw|_Zna|_Zdl|_Zda|_ZTI|_ZTS|_ZTV|_ZGV|__cxa_|__gxx_|_Unwind_|__dso_handle$|atexit$|__cxa_pure_virtual$)' || true)
# Guard variables and vtables defined in the object are as bad as referenced.
defined_bad=$(nm --defined-only "$obj" | awk '{print $3}' | grep -E '^(_ZGV|_ZTI|_ZTS)' || true)
if [ -n "$bad_syms$defined_bad" ]; then
	echo "$obj: C++ runtime symbols in the kernel core:" >&2
	printf '  %s\n' $bad_syms $defined_bad >&2
	status=1
fi

bad_secs=$(readelf -SW "$obj" | grep -oE '\.(init_array|fini_array|ctors|dtors|gcc_except_table|eh_frame|tbss|tdata)[^ ]*' || true)
if [ -n "$bad_secs" ]; then
	echo "$obj: sections the kernel does not support in the core:" >&2
	printf '  %s\n' $bad_secs >&2
	status=1
fi
exit $status
