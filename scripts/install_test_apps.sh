#!/usr/bin/env bash
# Install the third-party software the end-to-end tests run, from Debian packages: DokuWiki
# (tests/e2e/test_wiki_e2e.py), served by PHP's built-in web server (php-cli); kiwix-serve
# (kiwix-tools); Redmine with SQLite and puma; the guide's recipes' chromedriver and Node; Firefox. The tests copy DokuWiki's configuration and data into a temporary
# directory and never touch the installed state.
# Nothing happens when they are already installed; installing needs root and apt-get.
set -euo pipefail

packages=()
[ -f /usr/share/dokuwiki/doku.php ] || packages+=(dokuwiki)
command -v php >/dev/null 2>&1 || packages+=(php-cli)
# The guide's Selenium and Puppeteer recipes (tests/e2e/test_readme_examples.py): Debian's chromedriver,
# and Node with npm (the test installs puppeteer-core from npm itself).
[ -x /usr/bin/chromedriver ] || packages+=(chromium-driver)
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)
# Firefox's own background traffic (tests/e2e/test_browser_traffic.py).
[ -x /usr/bin/firefox-esr ] || packages+=(firefox-esr)
# kiwix-serve, the server of WebArena's wikipedia site (tests/e2e/test_kiwix_e2e.py).
command -v kiwix-serve >/dev/null 2>&1 || packages+=(kiwix-tools)
# Redmine on SQLite served by puma, a Rails application that answers revalidations with 304
# (tests/e2e/test_redmine_e2e.py; its instance lives in a temporary directory).
[ -f /usr/share/redmine/config.ru ] || packages+=(redmine redmine-sqlite)
command -v puma >/dev/null 2>&1 || packages+=(puma)
# `ip netns` and veth pairs: the machines the fleet's tests make of network namespaces
# (tests/fleet/test_namespaces.py, tests/fleet/test_ray_machines.py).
command -v ip >/dev/null 2>&1 || packages+=(iproute2)
# A container engine for the tests of site copies made through one (tests/containers/,
# tests/support/engines.py): Debian's podman with runc (crun refuses these machines' cgroup layout), the
# network stack and helpers podman only recommends, and mmdebstrap for the test images' Debian base
# (scripts/build_site_images.sh, which bootstrap.sh runs after this).
for package in podman runc netavark aardvark-dns iptables catatonit uidmap slirp4netns fuse-overlayfs mmdebstrap; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || packages+=("$package")
done
[ ${#packages[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "The end-to-end tests need ${packages[*]}: install them first (sudo apt-get install ${packages[*]}), then run this again." >&2
    exit 1
fi
echo "==> installing ${packages[*]} with apt-get (for the DokuWiki, Kiwix and Redmine end-to-end tests, the guide's recipes and the container tests)"
# --no-install-recommends: the recommends add ImageMagick, database drivers and more the tests never use.
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
