/* main.c - the command line: a name -> function table of the subcommands
 * (src/cmd/, one file each). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/tune.h"
#include "cmd/cmd.h"
#include "core/cfg.h"
#include "core/title.h"

static const struct command {
	const char *name;
	int (*fn)(int, char **);
} commands[] = {
	{ "run", cmd_run },
	{ "status", cmd_status },
	{ "history", cmd_history },
	{ "check", cmd_check },
	{ "pause", cmd_pause },
	{ "resume", cmd_resume },
	{ "trigger", cmd_trigger },
	{ "handoff", cmd_handoff },
	{ "repair", cmd_repair },
	{ "drain", cmd_drain },
	{ "undrain", cmd_undrain },
	{ "version", cmd_version },
	{ "help", cmd_help },
	{ "_http", cmd_http },
	{ "--help", cmd_help },
	{ "--version", cmd_version },
};

/* leash CMD --help: CMD's line of the usage (as leash(1)'s synopsis has
 * it), on stdout, and where the rest is. */
static int command_help(const char *name)
{
	size_t n = strlen(name);

	for (const char *l = cmd_usage; *l; ) {
		const char *end = strchr(l, '\n'), *w = strstr(l, "leash ");

		if (w && w < end && strncmp(w + 6, name, n) == 0 && (w[6 + n] == ' ' || w[6 + n] == '\n')) {
			printf("usage: %.*s\n", (int)(end - w), w);
			printf("see leash(1) (man leash) for what each option does\n");
			return 0;
		}
		l = end + 1;
	}
	fputs(cmd_usage, stdout);
	return 0;
}

/* `leash run` binds every library's symbols at start-up, its own and those
 * it dlopens: it runs itself again once with LD_BIND_NOW, which the dynamic
 * linker reads only when a program starts.  With lazy binding every run's
 * process resolved, and wrote into its copy of the tables, the functions
 * the parent had never called (Lua's own calls into liblua and libc above
 * all): 10 of a run's ~56 page faults and a tenth of its CPU.  The variable
 * goes again at once, so nothing a run starts inherits it.  Left alone when
 * it is set already, under valgrind (the second program would escape it),
 * and when the exec fails (then binding stays lazy). */
#define BIND_MARK "LEASH_BOUND_NOW"

static void bind_now(char **argv)
{
	const char *preload = getenv("LD_PRELOAD");
	char exe[PATH_MAX];
	ssize_t n;

	if (getenv(BIND_MARK)) {
		unsetenv(BIND_MARK);
		unsetenv("LD_BIND_NOW");
		return;
	}
	if (getenv("LD_BIND_NOW") || (preload && strstr(preload, "vgpreload")) ||
	    tune_off(TUNE_BINDNOW))
		return;
	/* The binary's own path, not /proc/self/exe: the process is named
	 * after the file it runs ("leash" in ps, not "exe"). */
	n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n > 0 && (size_t)n < sizeof exe - 1) {
		exe[n] = '\0';
		if (setenv("LD_BIND_NOW", "1", 1) == 0 && setenv(BIND_MARK, "1", 1) == 0)
			execv(exe, argv);
	}
	unsetenv(BIND_MARK);
	unsetenv("LD_BIND_NOW");
}

/* Takes every -o SECTION.KEY=VALUE (or -oSECTION.KEY=VALUE) out of the
 * command's arguments, up to a "--", for cfg_load: every command reads the
 * config the same way.  Returns the arguments left, or -1. */
static int take_options(int argc, char **argv)
{
	char err[512];
	int n = 1;

	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];

		if (strcmp(arg, "--") == 0) {
			while (i < argc)
				argv[n++] = argv[i++];
			break;
		}
		if (strncmp(arg, "-o", 2) != 0) {
			argv[n++] = argv[i];
			continue;
		}
		if (arg[2] == '\0' && ++i == argc) {
			fprintf(stderr, "leash: -o needs SECTION.KEY=VALUE (e.g. -o leash.replica=r2)\n");
			return -1;
		}
		if (cfg_option(arg[2] ? arg + 2 : argv[i], err, sizeof err) < 0) {
			fprintf(stderr, "%s\n", err);
			return -1;
		}
	}
	argv[n] = NULL;
	return n;
}

int main(int argc, char **argv)
{
	title_init(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "run") == 0)
		bind_now(argv);
	if (argc < 2) {
		fputs(cmd_usage, stderr);
		return EXIT_CONFIG;
	}
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
		if (strcmp(argv[1], commands[i].name) != 0)
			continue;
		if (argc >= 3 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0) &&
		    argv[1][0] != '-')
			return command_help(argv[1]);
		argc = take_options(argc - 1, argv + 1);
		if (argc < 0)
			return EXIT_CONFIG;
		return commands[i].fn(argc, argv + 1);
	}
	fprintf(stderr, "leash: unknown command \"%s\"\n%s", argv[1], cmd_usage);
	return EXIT_CONFIG;
}
