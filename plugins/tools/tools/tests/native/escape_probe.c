/* A hostile native extension, as model-written code could drop into the sandbox's folder and import.
 * Its constructor runs at dlopen time, before Python sees anything, and tries the escapes issue 13
 * found (system(), writing and stat-ing host paths) plus the kernel surfaces the sandbox must close.
 * Each probe prints "name=result"; the test reads them.  MARKER, REPO and PYTHON come from -D flags. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static void say(const char *name, long rc) {
    if (rc < 0) printf("%s=%s\n", name, strerror(errno));
    else printf("%s=ok\n", name);
}

__attribute__((constructor)) static void escape(void) {
    struct stat st;
    printf("uid=%d euid=%d gid=%d\n", (int)getuid(), (int)geteuid(), (int)getgid());
    printf("system=%d\n", system("echo pwned > " MARKER));
    int fd = open(MARKER, O_WRONLY | O_CREAT, 0644);
    say("write_marker", fd);
    fd = open("/tmp/vista-native-escape.txt", O_WRONLY | O_CREAT, 0644);
    say("write_tmp", fd);
    say("stat_shadow", stat("/etc/shadow", &st));
    say("stat_repo", stat(REPO, &st));
    say("socket_inet", socket(AF_INET, SOCK_STREAM, 0));
    say("socket_inet6", socket(AF_INET6, SOCK_DGRAM, 0));
    say("socket_unix", socket(AF_UNIX, SOCK_STREAM, 0));
    say("ptrace", ptrace(PTRACE_TRACEME, 0, 0, 0));
    say("unshare_user", unshare(CLONE_NEWUSER));
    say("unshare_net", unshare(CLONE_NEWNET));
    say("mount", mount("none", "/sandbox/work", "tmpfs", 0, 0));
    say("keyctl", syscall(SYS_add_key, "user", "k", "v", 1, -2));
    say("bpf", syscall(SYS_bpf, 0, 0, 0));
    say("kill_pid1", kill(1, SIGKILL));
    char *argv[] = {PYTHON, "-c", "pass", NULL};
    say("execve", execve(PYTHON, argv, NULL));
    /* What the process can see: interfaces (network namespace) and processes (PID namespace). */
    FILE *net = fopen("/proc/net/dev", "r");
    char line[512];
    printf("interfaces=");
    if (net) {
        int row = 0;
        while (fgets(line, sizeof line, net)) {
            char *colon = strchr(line, ':');
            if (row++ >= 2 && colon) { *colon = 0; char *n = line; while (*n == ' ') n++; printf("%s ", n); }
        }
        fclose(net);
    }
    printf("\n");
    int pids = 0;
    DIR *proc = opendir("/proc");
    struct dirent *entry;
    while (proc && (entry = readdir(proc))) if (entry->d_name[0] >= '0' && entry->d_name[0] <= '9') pids++;
    if (proc) closedir(proc);
    printf("pids=%d\n", pids);
    FILE *status = fopen("/proc/self/status", "r");
    while (status && fgets(line, sizeof line, status))
        if (!strncmp(line, "Seccomp:", 8) || !strncmp(line, "CapEff:", 7) || !strncmp(line, "NoNewPrivs:", 11))
            printf("%s", line);
    if (status) fclose(status);
    fflush(stdout);
}
