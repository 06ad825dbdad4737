# The kernel init's reaper: what the init execs into once the interpreter
# runs, so that no Go runtime stays resident in every kernel
# (docs/design.md, "The init step"). GNU as, x86-64, no libc; the init
# wraps the bytes in a minimal ELF (reaper_linux_amd64.go holds them, and
# its test reassembles this file to check they match:
#   as --64 -o r.o reaper_amd64.asm && objcopy -O binary -j .text r.o r.bin).
#
# argv: [1] the interpreter's pid, [2] a signalfd for the forwarded signals
# and SIGCHLD (the init blocked them all before the exec), [3] the ready
# line, written to the status fd (3) first: the line says init=reaper only
# once the exec succeeded. Then: SIGCHLD -> wait4(-1, WNOHANG) until none
# is left (signals coalesce); when the interpreter is reaped, "exit N" or
# "signal N" to the status fd and exit with N or 128+N, as kinit.supervise
# does; any other signal is forwarded to the interpreter with kill(2).
# Code only: position independent, no data segment, the buffer on the stack.

	.intel_syntax noprefix
	.text

	.set SYS_read, 0
	.set SYS_write, 1
	.set SYS_wait4, 61
	.set SYS_kill, 62
	.set SYS_prctl, 157
	.set SYS_exit_group, 231
	.set PR_SET_NAME, 15
	.set EINTR, 4
	.set SIGCHLD, 17
	.set WNOHANG, 1
	.set STATUS_FD, 3
	.set EXIT_SETUP, 120		# kinit's exitSetup

_start:
	cmp qword ptr [rsp], 4		# argc
	jb fail
	mov eax, SYS_prctl		# comm: the fd number the exec went through otherwise
	mov edi, PR_SET_NAME
	lea rsi, [rip + name]
	syscall
	mov rdi, [rsp + 16]		# argv[1]
	call atoi
	mov r12d, eax			# r12: the interpreter's pid
	mov rdi, [rsp + 24]		# argv[2]
	call atoi
	mov r13d, eax			# r13: the signalfd
	mov rsi, [rsp + 32]		# argv[3]: the ready line
	mov rdx, rsi
1:	cmp byte ptr [rdx], 0
	je 2f
	inc rdx
	jmp 1b
2:	sub rdx, rsi
	call status
	sub rsp, 128			# one struct signalfd_siginfo; [rsp] also holds wait4's status

# Reap first: a SIGCHLD that came before the init blocked it is gone.
reap:
	mov eax, SYS_wait4
	mov edi, -1
	mov rsi, rsp
	mov edx, WNOHANG
	xor r10d, r10d
	syscall
	cmp rax, -EINTR
	je reap
	test rax, rax
	jz next				# children left, none ended
	js fail				# no child at all: the interpreter went unseen
	cmp eax, r12d
	jne reap			# an orphan, reaped
	mov ebx, [rsp]			# the interpreter's wait status
	mov eax, ebx
	and eax, 0x7f
	jz exited
	cmp eax, 0x7f
	je reap				# stopped: not an end
	mov ebx, eax			# killed by signal N: "signal N", exit 128+N
	lea r14d, [rax + 128]
	lea rsi, [rip + signaled]
	mov ecx, 7
	jmp report
exited:					# "exit N", exit N
	shr ebx, 8
	and ebx, 0xff
	mov r14d, ebx
	lea rsi, [rip + exitmsg]
	mov ecx, 5

# report writes the prefix at rsi (rcx bytes), ebx in decimal and a
# newline, then exits with r14d.
report:
	lea rdi, [rsp + 127]
	mov byte ptr [rdi], 10
	mov eax, ebx
	mov r8d, 10
3:	xor edx, edx
	div r8d
	add dl, '0'
	dec rdi
	mov [rdi], dl
	test eax, eax
	jnz 3b
	sub rdi, rcx
	mov r9, rdi
	rep movsb
	mov rsi, r9
	lea rdx, [rsp + 128]
	sub rdx, rsi
	call status
	mov edi, r14d
	mov eax, SYS_exit_group
	syscall

# next waits for a signal: SIGCHLD reaps, any other is forwarded.
next:
	xor eax, eax			# SYS_read
	mov edi, r13d
	mov rsi, rsp
	mov edx, 128
	syscall
	cmp rax, -EINTR
	je next
	cmp rax, 128
	jne fail
	mov esi, [rsp]			# ssi_signo
	cmp esi, SIGCHLD
	je reap
	mov eax, SYS_kill
	mov edi, r12d
	syscall				# an error (the interpreter just ended) is moot
	jmp next

fail:
	lea rsi, [rip + failmsg]
	mov edx, failend - failmsg
	call status
	mov edi, EXIT_SETUP
	mov eax, SYS_exit_group
	syscall

# status writes rdx bytes at rsi to the status fd (one write: a pipe takes
# up to PIPE_BUF bytes whole).
status:
	mov eax, SYS_write
	mov edi, STATUS_FD
	syscall
	cmp rax, -EINTR
	je status
	ret

# atoi reads the decimal at rdi into eax.
atoi:
	xor eax, eax
4:	movzx ecx, byte ptr [rdi]
	sub ecx, '0'
	cmp ecx, 9
	ja 5f
	imul eax, eax, 10
	add eax, ecx
	inc rdi
	jmp 4b
5:	ret

name:	.ascii "kernpool-reaper\0"
exitmsg:	.ascii "exit "
signaled:	.ascii "signal "
failmsg:	.ascii "fail reaper: wait4 or signalfd read failed\n"
failend:
