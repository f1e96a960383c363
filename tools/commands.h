/* The vkgraph command-line tool: one file per command (tools/cmd_NAME.c), each an entry here. */
#ifndef VKG_COMMANDS_H
#define VKG_COMMANDS_H

/* Each returns the process exit status: 0 success, 1 a user-facing error (already printed). */
typedef int (*vkg_command_fn)(int argc, char **argv);

typedef struct vkg_command {
    const char *name;
    vkg_command_fn run;
    const char *summary;
    int flags; /* CMD_DEVICE, CMD_PROFILE */
} vkg_command;

/* What a command takes of the options main lists for several commands: --device (it opens a
 * device), --profile / --trace / --group-by (it runs graphs whose steps can be timed).  A
 * command without the flag refuses the option by name. */
enum { CMD_DEVICE = 1, CMD_PROFILE = 2 };

int cmd_dump(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_conformance(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_lesson(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_attention(int argc, char **argv);
int cmd_gpt2_random(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_random(int argc, char **argv);
/* Shared by the random writers: whether dir/name exists; refusing to overwrite a real model
 * (0, or 1 after printing why). */
int random_exists_in(const char *dir, const char *name);
int random_check_not_a_model(const char *cmd, const char *dir, int force);

#endif
