#!/usr/bin/env bash
# Add Kestrel to this user's application menu: the .desktop entry (pointing at the kestrel
# executable next to this script) and its icon, under ~/.local/share (or $XDG_DATA_HOME).
#   ./install-desktop-entry.sh            install (again: it replaces what it installed before)
#   ./install-desktop-entry.sh --remove   remove them
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=${XDG_DATA_HOME:-$HOME/.local/share}
ENTRY=$DATA/applications/kestrel.desktop
SVG=$DATA/icons/hicolor/scalable/apps/kestrel.svg
PNG=$DATA/icons/hicolor/256x256/apps/kestrel.png

refresh() {
  command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database -q "$DATA/applications" || true
  command -v gtk-update-icon-cache >/dev/null 2>&1 && gtk-update-icon-cache -q -t "$DATA/icons/hicolor" || true
}

case "${1:-}" in
  --remove)
    rm -f "$ENTRY" "$SVG" "$PNG"
    refresh
    echo "removed Kestrel's menu entry and icon from $DATA"
    exit 0 ;;
  "") ;;
  *) echo "usage: $0 [--remove]" >&2; exit 2 ;;
esac

for needed in kestrel kestrel.desktop kestrel.svg kestrel.png; do
  if [ ! -e "$HERE/$needed" ]; then
    echo "install-desktop-entry: $HERE/$needed is missing; run this script from the Kestrel bundle folder" >&2
    exit 1
  fi
done
mkdir -p "$(dirname "$ENTRY")" "$(dirname "$SVG")" "$(dirname "$PNG")"
cp "$HERE/kestrel.svg" "$SVG"
cp "$HERE/kestrel.png" "$PNG"
# the bundle's own executable, quoted and escaped as the Desktop Entry spec asks (a path may
# hold spaces, quotes, $ or backslashes)
EXEC=$(printf '%s' "$HERE/kestrel" | sed -e 's/\\/\\\\\\\\/g' -e 's/"/\\\\"/g' -e 's/`/\\\\`/g' -e 's/\$/\\\\$/g')
TRYEXEC=$(printf '%s' "$HERE/kestrel" | sed -e 's/\\/\\\\/g')
while IFS= read -r line; do
  case "$line" in
    Exec=*) printf 'Exec="%s"\n' "$EXEC" ;;
    TryExec=*) printf 'TryExec=%s\n' "$TRYEXEC" ;;
    *) printf '%s\n' "$line" ;;
  esac
done < "$HERE/kestrel.desktop" > "$ENTRY.tmp"
mv "$ENTRY.tmp" "$ENTRY"
chmod 644 "$ENTRY"
refresh
echo "installed $ENTRY (runs $HERE/kestrel) and its icon"
