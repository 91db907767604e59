/* run.h — `ncc run` and `ncc bench`: compile a .net model, load the result
 * with dlopen and execute it on a GPU or under CPU emulation.
 *
 * frontend/main.c dispatches `ncc run ...` to run_main and `ncc bench ...` to
 * bench_main; argv[0] is "run" / "bench" and the flags follow.  Both return
 * the process exit status: 0 success, 1 a user error (bad model, bad file,
 * bad flag) after a message on stderr, 2 an internal error of ncc. */
#ifndef NCC_RUN_H
#define NCC_RUN_H

int run_main(int argc, char **argv);
int bench_main(int argc, char **argv);

#endif
