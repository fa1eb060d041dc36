/* main.c - the command line: a name -> function table of the subcommands
 * (src/cmd/, one file each). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
