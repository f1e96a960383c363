/* Faults around the commands' input and output: id lists that are not exactly a list of ids are
 * refused with the character where they go wrong, and every failure to write a result (stdout
 * closed or full, a trace, .npy or PNG file that cannot be written) ends with a message and exit
 * status 1, never 0. */
#include "gpt2_cli_run.h"

/* Runs `vkgraph ARGS REDIRECT` through the shell, so that stdout can be /dev/full or closed. */
static result shell(const char *args, const char *redirect) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "exec '%s' %s %s", bin, args, redirect);
    return run((const char *const[]){"/bin/sh", "-c", cmd, NULL}, NULL);
}

/* A run refused with exactly the message want (one line), before it loaded the model. */
static void expect_refused_early(result r, const char *want) {
    if (r.status != 1) fail_msg("exit %d (expected 1), stderr: %s", r.status, r.err);
    assert_string_equal(r.err, want);
    result_free(&r);
}

static void test_lenient_ids_refused(void **state) {
    (void)state;
    need_binary();
    const char *out = in_tmp("ids.npy");
    static const struct { const char *ids, *part; } bad[] = {
        {"1,2,", "--ids \"1,2,\": at the end: a token id is missing"},
        {",1", "--ids \",1\": at character 1: a token id is missing"},
        {"1,,2", "--ids \"1,,2\": at character 3: a token id is missing"},
        {"[1,2", "--ids \"[1,2\": at the end: \"[\" is not closed by \"]\""},
        {"1, ,2", "--ids \"1, ,2\": at character 4: a token id is missing"},
        {"1 2,", "--ids \"1 2,\": at the end: a token id is missing"},
        {"+1", "--ids \"+1\": at character 1: \"+1\" is not a token id"},
        {"1 +2", "--ids \"1 +2\": at character 3: unexpected text after the ids"},
        {"-1", "at character 1: \"-1\" is not a token id"},
        {"1]", "at character 2: \"]\" without \"[\""},
        {"[1,2]x", "at character 6: unexpected text after the ids"},
        {"1,x,3", "at character 3: \"x\" is not a token id"},
        {"2147483648", "\"2147483648\" is not a token id"},
        {"[]", "--ids: no token ids given"},
        {"", "--ids: no token ids given"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_fail(VKG("logits", "-m", tiny, "--ids", bad[i].ids, "-o", out, "--device", "cpu"), "logits",
                    bad[i].part);
    /* commas or spaces, as tokenize --help says; spaces around the list are no item */
    const char *good[] = {"1,2,3", "[1, 2, 3]", "[1,2,3]", "1, 2,3", "7", "1 2 3", "[1 2 3]", " 1 ,2\n", "[ 1, 2 ]\n"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        result r = VKG("logits", "-m", tiny, "--ids", good[i], "-o", out, "--device", "cpu");
        expect_ok(&r, good[i]);
        result_free(&r);
    }
}

static void test_write_failures(void **state) {
    (void)state;
    need_binary();
    char args[2400];
    /* stdout full or closed */
    snprintf(args, sizeof args, "dump -m '%s'", tiny);
    expect_fail(shell(args, ">/dev/full"), "dump", "cannot write to standard output: No space left on device");
    expect_fail(shell(args, ">&-"), "dump", "cannot write to standard output: Bad file descriptor");
    snprintf(args, sizeof args, "dump -m '%s' --plan --format json", tiny);
    expect_fail(shell(args, ">/dev/full"), "dump", "cannot write to standard output");
    snprintf(args, sizeof args, "logits -m '%s' --ids 1,2 -o '%s' --device cpu", tiny, in_tmp("w.npy"));
    expect_fail(shell(args, ">/dev/full"), "logits", "cannot write to standard output: No space left on device");
    expect_fail(shell(args, ">&-"), "logits", "cannot write to standard output: Bad file descriptor");
    snprintf(args, sizeof args, "attention -m '%s' --ids 1,2,3 --layer 0 --device cpu", tiny);
    expect_fail(shell(args, ">/dev/full"), "attention", "cannot write to standard output");
    expect_fail(shell("--version", ">/dev/full"), "--version", "cannot write to standard output");
    /* a .npy on a device that takes no bytes (named through a link, as it must end in .npy): an
     * error naming it, and the device and the link left in place */
    const char *full = in_tmp("full.npy");
    remove(full);
    assert_int_equal(symlink("/dev/full", full), 0);
    char want_full[1300];
    snprintf(want_full, sizeof want_full, "cannot write %s: No space left on device", full);
    expect_fail(VKG("attention", "-m", tiny, "--ids", "1,2,3", "--layer", "all", "--npy", full, "--device", "cpu"),
                "attention", want_full);
    assert_int_equal(access("/dev/full", F_OK), 0);
    struct stat lb;
    assert_int_equal(lstat(full, &lb), 0);
    assert_true(S_ISLNK(lb.st_mode));
    /* with stdout closed, the .npy file does not take its descriptor: it is still a whole .npy */
    struct stat sb;
    assert_int_equal(stat(in_tmp("w.npy"), &sb), 0);
    FILE *f = fopen(in_tmp("w.npy"), "rb");
    assert_non_null(f);
    char magic[6] = {0};
    assert_int_equal(fread(magic, 1, 6, f), 6);
    fclose(f);
    assert_memory_equal(magic, "\x93NUMPY", 6);

    /* files in a place that cannot be written (under a regular file: refused even for root) */
    const char *file = in_tmp("plain");
    f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    char trace[1300], npy[1300], png[1300];
    snprintf(trace, sizeof trace, "%s/t.json", file);
    snprintf(npy, sizeof npy, "%s/x.npy", file);
    snprintf(png, sizeof png, "%s/x.png", file);
    /* Each is refused before the model loads: the model's "RANDOM weights" note never comes. */
    char want[1400];
    snprintf(want, sizeof want, "vkgraph logits: --trace %s: cannot write: Not a directory\n", trace);
    expect_refused_early(VKG("logits", "-m", tiny, "--ids", "1,2", "-o", in_tmp("w.npy"), "--device", "cpu", "--trace",
                             trace), want);
    snprintf(want, sizeof want, "vkgraph generate: --trace %s: cannot write: Not a directory\n", trace);
    expect_refused_early(VKG("generate", "-m", tiny, "--ids", "1,2", "-n", "2", "--device", "cpu", "--trace", trace),
                         want);
    snprintf(want, sizeof want, "vkgraph logits: -o %s: cannot write: Not a directory\n", npy);
    expect_refused_early(VKG("logits", "-m", tiny, "--ids", "1,2", "-o", npy, "--device", "cpu"), want);
    snprintf(want, sizeof want, "vkgraph attention: --npy %s: cannot write: Not a directory\n", npy);
    expect_refused_early(VKG("attention", "-m", tiny, "--ids", "1,2,3", "--layer", "0", "--npy", npy, "--device",
                             "cpu"), want);
    snprintf(want, sizeof want, "vkgraph attention: --png %s: cannot write: Not a directory\n", png);
    expect_refused_early(VKG("attention", "-m", tiny, "--ids", "1,2,3", "--layer", "0", "--png", png, "--device",
                             "cpu"), want);
    expect_refused_early(VKG("attention", "-m", tiny, "--ids", "1,2,3", "--layer", "all", "--png", "/proc/x.png"),
                         "vkgraph attention: --png /proc/x.png: cannot write: No such file or directory\n");
    expect_fail(VKG("lesson", "--png", in_tmp("y.png"), "1"), "lesson",
                "--png is for step 7, which looks inside GPT-2: give -m DIR too");
    expect_fail(VKG("lesson", "-m", tiny, "3"), "lesson", "-m DIR is for step 7; step 3 needs no model");
    expect_refused_early(VKG("lesson", "-m", tiny, "7", "--png", "/proc/x.png"),
                         "vkgraph lesson: --png /proc/x.png: cannot write: No such file or directory\n");
    expect_refused_early(VKG("bench", "--random", "gpt2-tiny", "--logits", "/proc/nowhere", "-T", "4", "--decode", "2"),
                         "vkgraph bench: --logits /proc/nowhere/forward-4.npy: cannot write: No such file or "
                         "directory\n");
    /* the implicit trace file of --profile, in the current folder, is checked as well: here a folder
     * of that name stands in its way */
    char cwd[1300], in_the_way[1400];
    snprintf(cwd, sizeof cwd, "%s", in_tmp("cwd"));
    snprintf(in_the_way, sizeof in_the_way, "%s/vkgraph-trace.json", cwd);
    assert_int_equal(mkdir(cwd, 0700), 0);
    assert_int_equal(mkdir(in_the_way, 0700), 0);
    char line[6000];
    snprintf(line, sizeof line, "cd '%s' && exec '%s' logits -m '%s' --ids 1,2 -o '%s' --device cpu --profile", cwd, bin,
             tiny, in_tmp("w.npy"));
    expect_refused_early(run((const char *const[]){"/bin/sh", "-c", line, NULL}, NULL),
                         "vkgraph logits: --profile (its Chrome trace) vkgraph-trace.json: cannot write: Is a "
                         "directory\n");
    /* a check leaves nothing behind: a new file it made to try is gone again */
    const char *fresh = in_tmp("fresh.png");
    expect_fail(VKG("attention", "-m", tiny, "--ids", "1,2,3", "--layer", "7", "--png", fresh), "attention",
                "--layer 7: must be 0 to 1 (the model has 2 layers) or all");
    assert_int_equal(access(fresh, F_OK), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lenient_ids_refused),
        cmocka_unit_test(test_write_failures),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
