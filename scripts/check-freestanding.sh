#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Fail if a compiled C++ core object steps outside the kernel-safe subset:
# C++ runtime references (operator new/delete, exceptions, RTTI, static-init
# guards, atexit) or sections the kernel never runs or never loads (global
# constructors/destructors, exception tables, thread-locals).
#
#   check-freestanding.sh [--asan-ctors] OBJECT
#
# --asan-ctors (a KASAN kernel, see kernel/Kbuild): the compiler registers
# the object's globals with KASAN from a constructor it generates (one
# .init_array entry, _sub_I_<prio>_<n>, calling __asan_register_globals; a
# .fini_array entry unregisters them, which modules never run), exactly as
# in the kernel's C objects.  Those are allowed; C++ dynamic initialisation
# (_GLOBAL__sub_I_*) or any further constructor is still refused.
set -eu
asan_ctors=0
if [ "$1" = --asan-ctors ]; then
	asan_ctors=1
	shift
fi
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
sec_size() {
	readelf -SW "$obj" | sed 's/^ *\[ *[0-9]*\] *//' | awk -v s="$1" '$1 == s { print $5 }'
}
if [ $asan_ctors = 1 ] && printf '%s\n' "$undef" | grep -qx __asan_register_globals; then
	syms=$(nm "$obj" | awk '{ print $NF }')
	if [ "$(sec_size .init_array)" = 000008 ] && [ "$(sec_size .fini_array)" = 000008 ] &&
		[ "$(printf '%s\n' "$syms" | grep -cE '^_sub_I_[0-9]+_[0-9]+$')" = 1 ] &&
		[ "$(printf '%s\n' "$syms" | grep -cE '^_sub_D_[0-9]+_[0-9]+$')" = 1 ] &&
		! printf '%s\n' "$syms" | grep -qE '^_GLOBAL__sub_[ID]_'; then
		bad_secs=$(printf '%s\n' $bad_secs | grep -vxE '\.(init|fini)_array' || true)
	fi
fi
if [ -n "$bad_secs" ]; then
	echo "$obj: sections the kernel does not support in the core:" >&2
	printf '  %s\n' $bad_secs >&2
	status=1
fi
exit $status
