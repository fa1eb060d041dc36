#!/bin/sh
# Installs the Debian packages leash needs to build, run and test.
# Run as root on Debian 12; does nothing when everything is already there.
set -e
# gnutls-bin: certtool makes the throwaway certificate of the HTTPS spec
# (tests/http_safe_spec.lua).
PKGS="build-essential pkg-config liblua5.4-dev lua5.4 libinih-dev libpq-dev
libsqlite3-dev sqlite3 freetds-dev freetds-bin lua-busted postgresql procps
python3 tzdata faketime libmicrohttpd-dev curl chromium prometheus gnutls-bin
dpkg-dev lintian man-db systemd"
# Babelfish beside the repository (../shared/babelfish: the suite's real T-SQL
# engine, tests/support/services/30-babelfish.sh) needs these to run.
if [ -d "$(dirname "$0")/../../shared/babelfish" ]; then
	PKGS="$PKGS libossp-uuid16 libicu72 libxml2"
fi
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "tools/deps.sh: missing packages:$missing (run as root to install them)" >&2
	exit 1
fi
echo "tools/deps.sh: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >/dev/null
