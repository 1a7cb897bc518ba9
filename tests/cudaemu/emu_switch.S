/* The fibers' context switch (x86-64 System V): saves the callee-saved registers on the
 * current stack, stores its pointer in *from, loads `to` and restores the registers saved
 * there. A new fiber's stack is laid out by emu_fiber.cc so that the `ret` lands in
 * fgemu_fiber_entry with the entry function in r12 and its argument in r13. glibc's
 * swapcontext also saves the signal mask with a system call on every switch. */
        .text
        .globl  fgemu_switch
        .hidden fgemu_switch
        .type   fgemu_switch, @function
fgemu_switch:                   /* void fgemu_switch(void **from, void *to) */
        pushq   %rbp
        pushq   %rbx
        pushq   %r12
        pushq   %r13
        pushq   %r14
        pushq   %r15
        movq    %rsp, (%rdi)
        movq    %rsi, %rsp
        popq    %r15
        popq    %r14
        popq    %r13
        popq    %r12
        popq    %rbx
        popq    %rbp
        ret
        .size   fgemu_switch, .-fgemu_switch

        .globl  fgemu_fiber_entry
        .hidden fgemu_fiber_entry
        .type   fgemu_fiber_entry, @function
fgemu_fiber_entry:
        movq    %r13, %rdi
        callq   *%r12           /* never returns: the fiber switches away when done */
        ud2
        .size   fgemu_fiber_entry, .-fgemu_fiber_entry
        .section .note.GNU-stack,"",@progbits
