/* Every user error of the GPT-2 commands is answered with "vkgraph CMD: message" and exit status
 * 1, never a crash; and tools/fetch-gpt2.sh against a local stand-in for the Hugging Face hub
 * (file:// URLs) and with the hub out of reach. */
#include "gpt2_cli_run.h"

/* ---- errors ------------------------------------------------------------------------------------ */

static void test_errors(void **state) {
    (void)state;
    need_binary();
    expect_fail(VKG("logits", "-m", "/nonexistent/model", "--ids", "1", "-o", in_tmp("x.npy")), "logits",
                "/nonexistent/model");
    expect_fail(VKG("logits", "-m", tiny, "--ids", "5,9999", "-o", in_tmp("x.npy")), "logits",
                "token id 9999 at position 1 is outside the vocabulary [0, 512)");
    char many[256] = "0";
    for (int i = 1; i < 33; i++) strcat(many, ",1");
    expect_fail(VKG("logits", "-m", tiny, "--ids", many, "-o", in_tmp("x.npy")), "logits",
                "33 tokens, more than the model's context of 32 positions");
    expect_fail(VKG("logits", "-m", tiny, "--ids", "1,x,3", "-o", in_tmp("x.npy")), "logits", "\"x\" is not a token id");
    expect_fail(VKG("logits", "-m", tiny, "--ids", "1"), "logits", "-o OUT.npy");
    expect_fail(VKG("logits", "-m", tiny, "-p", "hello", "-o", in_tmp("x.npy")), "logits", "has no tokenizer");
    expect_fail(VKG("logits", "-m", tiny, "--ids", "1", "-p", "hi", "-o", in_tmp("x.npy")), "logits", "exactly one of");
    expect_fail(VKG("logits", "-m", tiny, "--ids", "1", "-o", in_tmp("x.npy"), "--device", "tpu"), "logits", "tpu");
    expect_fail(VKG("logits", "-m", tiny, "--ids", "1", "-o", "/nonexistent/dir/x.npy", "--device", "cpu"), "logits",
                "/nonexistent/dir/x.npy");
    expect_fail(VKG("generate", "-m", tiny, "--ids", "1", "--bogus"), "generate", "unknown option '--bogus'");
    expect_fail(VKG("generate", "-m", tiny, "--ids", "1", "--top-p", "2"), "generate", "--top-p");
    expect_fail(VKG("generate", "-m", tiny, "--ids", "1", "-n"), "generate", "needs a value");
    expect_fail(VKG("gpt2-random", in_tmp("bad"), "--heads", "5", "--embd", "32"), "gpt2-random", "multiple of --heads");

    /* Malformed model folders. */
    char dir[1200];
    snprintf(dir, sizeof dir, "%s", in_tmp("broken"));
    result r = VKG("gpt2-random", dir, "--vocab", "100", "--embd", "16", "--ctx", "8");
    expect_ok(&r, "gpt2-random --vocab");
    result_free(&r);
    char p[1300];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    assert_int_equal(truncate(p, 3000), 0);
    expect_fail(VKG("generate", "-m", dir, "--ids", "1,2"), "generate", "model.safetensors");
    assert_int_equal(unlink(p), 0);
    expect_fail(VKG("generate", "-m", dir, "--ids", "1,2"), "generate", "no model.safetensors");
    snprintf(p, sizeof p, "%s/config.json", dir);
    assert_int_equal(unlink(p), 0);
    expect_fail(VKG("attention", "-m", dir, "--ids", "1,2", "--layer", "0"), "attention", "no config.json");
}

/* ---- fetch-gpt2.sh ----------------------------------------------------------------------------- */

static void test_fetch_script(void **state) {
    (void)state;
    char script[1200], fake[1200], api[2600], base[2600], bad_api[2600];
    snprintf(script, sizeof script, "%s/../../tools/fetch-gpt2.sh", data_dir);
    snprintf(fake, sizeof fake, "%s/fetch-fake", data_dir);
    char abs[2400], cwd[1024];
    assert_non_null(getcwd(cwd, sizeof cwd));
    snprintf(abs, sizeof abs, "%s%s%s", fake[0] == '/' ? "" : cwd, fake[0] == '/' ? "" : "/", fake);
    snprintf(api, sizeof api, "VKG_HF_API_URL=file://%s/tree.json", abs);
    snprintf(bad_api, sizeof bad_api, "VKG_HF_API_URL=file://%s/tree-wrong-hash.json", abs);
    snprintf(base, sizeof base, "VKG_HF_BASE_URL=file://%s", abs);
    setenv("VKG_HF_BASE_URL", base + strlen("VKG_HF_BASE_URL="), 1); /* inherited by the children */
    unsetenv("VKG_OFFLINE");

    /* The hub out of reach: said at once, status 2. */
    result r = run((const char *const[]){"/bin/sh", script, in_tmp("offline"), NULL},
                   "VKG_HF_API_URL=http://127.0.0.1:9/api/models/gpt2/tree/main");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "cannot reach the Hugging Face hub"));
    assert_true(r.seconds < 10);
    result_free(&r);

    /* VKG_OFFLINE=1: the same status at once, without contacting anything. */
    r = run((const char *const[]){"/bin/sh", script, in_tmp("offline"), NULL}, "VKG_OFFLINE=1");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "VKG_OFFLINE is set: not contacting the Hugging Face hub"));
    result_free(&r);

    /* From the stand-in: every file arrives and checks out. */
    char dir[1200];
    snprintf(dir, sizeof dir, "%s", in_tmp("fetched"));
    r = run((const char *const[]){"/bin/sh", script, dir, NULL}, api);
    if (r.status != 0) fail_msg("fetch: exit %d: %s", r.status, r.err);
    assert_non_null(strstr(r.err, "model.safetensors: checks out (3000 bytes, sha256"));
    assert_non_null(strstr(r.err, "config.json: checks out (43 bytes, git-sha1"));
    result_free(&r);
    static const char *const files[] = {"config.json", "vocab.json", "merges.txt", "model.safetensors"};
    for (int i = 0; i < 4; i++) {
        char a[1300], b[2600];
        snprintf(a, sizeof a, "%s/%s", dir, files[i]);
        snprintf(b, sizeof b, "%s/%s", abs, files[i]);
        size_t la, lb;
        char *x = test_read_file(a, &la), *y = test_read_file(b, &lb);
        assert_int_equal(la, lb);
        assert_memory_equal(x, y, la);
        free(x);
        free(y);
    }
    /* Again: nothing to fetch. */
    r = run((const char *const[]){"/bin/sh", script, dir, NULL}, api);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.err, "model.safetensors: already there and checks out"));
    result_free(&r);

    /* A partial download resumes to the right file. */
    char model[1300], part[1300], cmd[4200];
    snprintf(model, sizeof model, "%s/model.safetensors", dir);
    snprintf(part, sizeof part, "%s/model.safetensors.part", dir);
    snprintf(cmd, sizeof cmd, "head -c 1000 '%s' > '%s' && rm '%s'", model, part, model);
    assert_int_equal(system(cmd), 0);
    r = run((const char *const[]){"/bin/sh", script, dir, NULL}, api);
    assert_int_equal(r.status, 0);
    result_free(&r);
    struct stat sb;
    assert_int_equal(stat(model, &sb), 0);
    assert_int_equal(sb.st_size, 3000);
    assert_int_not_equal(stat(part, &sb), 0);

    /* A file that does not match the listing is refused and set aside. */
    assert_int_equal(unlink(model), 0);
    r = run((const char *const[]){"/bin/sh", script, dir, NULL}, bad_api);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "model.safetensors does not match the hub's listing: sha256"));
    result_free(&r);
    assert_int_not_equal(stat(model, &sb), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_fetch_script),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
