# mk/install.mk - make install, make uninstall, make deb.
#
# Where things go (DESTDIR is prepended to every path):
#   $(PREFIX)/bin/leash                  the binary
#   $(PREFIX)/share/leash/lua/leash/     its Lua modules; the binary finds them
#                                        from its own location (src/core/lx.c), so
#                                        they always move with PREFIX
#   $(MANDIR)/man1/leash.1               the man pages (man/; leash.ini.5 is
#   $(MANDIR)/man5/leash.ini.5           made by make man, see mk/man.mk)
#   $(MANDIR)/man5/leash-job.5
#   $(UNITDIR)/leash.service             the systemd unit (not enabled)
#   $(SYSCONFDIR)/leash/leash.ini        example config  } only when missing:
#   $(SYSCONFDIR)/leash/jobs/*.lua       example jobs    } never overwritten
# SYSCONFDIR is /etc whatever PREFIX is: `leash` looks for
# /etc/leash/leash.ini when given no -c, and the unit runs it with that file.
# UNITDIR defaults to $(PREFIX)/lib/systemd/system, which systemd reads for
# PREFIX=/usr/local and /usr; for another PREFIX set UNITDIR=/etc/systemd/system.
# The installed unit and config name the real paths ($(PREFIX)/bin/leash,
# $(SYSCONFDIR)/leash).  `make uninstall` leaves $(SYSCONFDIR)/leash alone.
#
# make deb builds leash_$(VERSION)_<arch>.deb into DEB_OUT (default: here)
# from a fresh build in DEB_BUILD, with Debian's hardening flags, stripped.

DESTDIR    ?=
SYSCONFDIR ?= /etc
MANDIR     ?= $(PREFIX)/share/man
UNITDIR    ?= $(PREFIX)/lib/systemd/system
INSTALL    ?= install

inst_bindir  := $(PREFIX)/bin
inst_luadir  := $(PREFIX)/share/leash/lua
inst_confdir := $(SYSCONFDIR)/leash
inst_modules := $(notdir $(wildcard lua/leash/*.lua))
# The example jobs, by name: a job file an operator or a test left in the
# working tree's jobs/ is never installed or packaged.
inst_jobs    := mcp-discovery.lua model-health.lua
# The packaged files name /usr/bin/leash, /etc/leash and the version; these
# turn them into the paths of this install.
inst_paths   := sed -e 's|/usr/bin/leash|$(inst_bindir)/leash|g' -e 's|/etc/leash/|$(inst_confdir)/|g'
inst_man     := sed -e 's|^\(\.TH [^ ]* [0-9] [^ ]* "leash\)"|\1 $(VERSION)"|' -e 's|/etc/leash/|$(inst_confdir)/|g'
inst_pages   := man1/leash.1 man5/leash.ini.5 man5/leash-job.5

install: $(BUILD)/leash
	$(INSTALL) -d $(DESTDIR)$(inst_bindir) $(DESTDIR)$(inst_luadir)/leash \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(UNITDIR)
	$(INSTALL) -m 755 $(BUILD)/leash $(DESTDIR)$(inst_bindir)/leash
	$(INSTALL) -m 644 $(addprefix lua/leash/,$(inst_modules)) $(DESTDIR)$(inst_luadir)/leash/
	for p in $(inst_pages); do \
		$(inst_man) man/$${p#*/} > $(DESTDIR)$(MANDIR)/$$p && chmod 644 $(DESTDIR)$(MANDIR)/$$p || exit 1; \
	done
	$(inst_paths) packaging/leash.service > $(DESTDIR)$(UNITDIR)/leash.service
	chmod 644 $(DESTDIR)$(UNITDIR)/leash.service
	$(INSTALL) -d $(DESTDIR)$(inst_confdir)
	@if [ -e $(DESTDIR)$(inst_confdir)/leash.ini ]; then \
		echo "keeping $(DESTDIR)$(inst_confdir)/leash.ini (the example is packaging/leash.ini)"; \
	else \
		echo "$(inst_paths) packaging/leash.ini > $(DESTDIR)$(inst_confdir)/leash.ini"; \
		$(inst_paths) packaging/leash.ini > $(DESTDIR)$(inst_confdir)/leash.ini && \
		chmod 644 $(DESTDIR)$(inst_confdir)/leash.ini; \
	fi
	@# A job directory that exists is the operator's: an example job put back
	@# into it would start running on the next reload.
	@if [ -e $(DESTDIR)$(inst_confdir)/jobs ]; then \
		echo "keeping $(DESTDIR)$(inst_confdir)/jobs (the examples are in jobs/)"; \
	else \
		echo "$(INSTALL) -m 644 jobs/*.lua $(DESTDIR)$(inst_confdir)/jobs/"; \
		$(INSTALL) -d $(DESTDIR)$(inst_confdir)/jobs && \
		$(INSTALL) -m 644 $(addprefix jobs/,$(inst_jobs)) $(DESTDIR)$(inst_confdir)/jobs/; \
	fi

uninstall:
	rm -f $(DESTDIR)$(inst_bindir)/leash $(addprefix $(DESTDIR)$(MANDIR)/,$(inst_pages)) \
		$(DESTDIR)$(UNITDIR)/leash.service \
		$(addprefix $(DESTDIR)$(inst_luadir)/leash/,$(inst_modules))
	-rmdir $(DESTDIR)$(inst_luadir)/leash $(DESTDIR)$(inst_luadir) \
		$(DESTDIR)$(PREFIX)/share/leash 2>/dev/null
	@echo "left $(DESTDIR)$(inst_confdir) in place (config and jobs are the operator's)"

# ---- the Debian package ----

DEB_BUILD ?= build-deb
DEB_OUT   ?= .
DEB_ARCH  := $(shell dpkg --print-architecture 2>/dev/null)
DEB_FILE  := $(DEB_OUT)/leash_$(VERSION)_$(DEB_ARCH).deb
deb_root  := $(DEB_BUILD)/debian/leash
# Libraries loaded with dlopen() on first use, which dpkg-shlibdeps cannot
# see: src/store/postgres.c loads libpq.so.5, src/store/mssql.c FreeTDS's libsybdb.so.5,
# src/store/sqlite.c libsqlite3.so.0, src/web/httpd.c (the HTTP server process)
# libmicrohttpd.so.12.
deb_dlopen := libpq5, libsybdb5, libsqlite3-0, libmicrohttpd12
deb_flags  = $(shell DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get $(1))
# The changelog's date: SOURCE_DATE_EPOCH, else the last commit, else now.
deb_epoch := $(or $(SOURCE_DATE_EPOCH),$(shell git log -1 --format=%ct 2>/dev/null),$(shell date +%s))

deb:
	@for t in dpkg-deb dpkg-buildflags dpkg-shlibdeps; do command -v $$t >/dev/null || \
		{ echo "make deb: needs $$t (dpkg-dev; see tools/deps.sh)" >&2; exit 1; }; done
	@case "$(DEB_BUILD)" in ""|.|./|/|$(BUILD)) echo "make deb: DEB_BUILD=$(DEB_BUILD) is not a scratch directory" >&2; exit 1;; esac
	rm -rf $(DEB_BUILD)
	CPPFLAGS='$(call deb_flags,CPPFLAGS)' $(MAKE) --no-print-directory BUILD=$(DEB_BUILD) \
		CFLAGS='$(call deb_flags,CFLAGS)' LDFLAGS='$(call deb_flags,LDFLAGS)' $(DEB_BUILD)/leash
	$(MAKE) --no-print-directory -o $(DEB_BUILD)/leash install BUILD=$(DEB_BUILD) DESTDIR=$(deb_root) PREFIX=/usr \
		SYSCONFDIR=/etc MANDIR=/usr/share/man UNITDIR=/lib/systemd/system
	strip --remove-section=.comment --remove-section=.note $(deb_root)/usr/bin/leash
	gzip -9n $(addprefix $(deb_root)/usr/share/man/,$(inst_pages))
	$(INSTALL) -d $(deb_root)/usr/share/doc/leash $(deb_root)/DEBIAN
	$(INSTALL) -m 644 packaging/deb/copyright $(deb_root)/usr/share/doc/leash/copyright
	sed -e 's/@VERSION@/$(VERSION)/' -e "s/@DATE@/$$(date -u -R -d @$(deb_epoch))/" \
		packaging/deb/changelog.in | gzip -9n > $(deb_root)/usr/share/doc/leash/changelog.gz
	chmod 644 $(deb_root)/usr/share/doc/leash/changelog.gz
	$(INSTALL) -m 755 packaging/deb/postinst packaging/deb/prerm packaging/deb/postrm $(deb_root)/DEBIAN/
	cd $(deb_root) && find etc -type f | sort | sed 's|^|/|' > DEBIAN/conffiles
	cd $(deb_root) && find usr lib -type f | sort | xargs md5sum > DEBIAN/md5sums
	@# dpkg-shlibdeps wants a debian/control beside the package tree.
	touch $(DEB_BUILD)/debian/control
	cd $(DEB_BUILD) && dpkg-shlibdeps -O debian/leash/usr/bin/leash | sed -n 's/^shlibs:Depends=//p' > shlibs
	@test -s $(DEB_BUILD)/shlibs || { echo "make deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
	sed -e 's/@VERSION@/$(VERSION)/' -e 's/@ARCH@/$(DEB_ARCH)/' \
		-e "s/@DEPENDS@/$$(cat $(DEB_BUILD)/shlibs), $(deb_dlopen)/" \
		-e "s/@SIZE@/$$(du -sk --exclude=DEBIAN $(deb_root) | cut -f1)/" \
		packaging/deb/control.in > $(deb_root)/DEBIAN/control
	chmod 644 $(deb_root)/DEBIAN/control $(deb_root)/DEBIAN/conffiles $(deb_root)/DEBIAN/md5sums
	@mkdir -p $(DEB_OUT)
	SOURCE_DATE_EPOCH=$(deb_epoch) dpkg-deb --root-owner-group --build $(deb_root) $(DEB_FILE)

.PHONY: install uninstall deb
