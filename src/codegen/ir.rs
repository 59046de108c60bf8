//! The typed tree that `#[userfn]` emits for each function body ([`FnDef`]).
//!
//! Every node is `'static` data built in a `static` by the macro, so a definition costs
//! nothing at run time until a GPU backend translates it. Types that only the library knows
//! (struct layouts, signatures of called functions) are referenced, not copied: a struct as
//! its [`Ty`] constant, a called function as `fn() -> &'static FnDef`.
//!
//! The tree is deliberately close to the Rust source: literals keep their text and suffix,
//! unsuffixed literals have no type yet, locals have an optional annotation. Types are
//! inferred by [`super::typeck`] when the tree is translated.

use super::Ty;

/// The typed description of one user function (filled in by `#[userfn]`).
///
/// ```
/// use skel::prelude::*;
/// use skel::userfn::UserFn;
/// #[userfn]
/// fn add(a: f32, b: f32) -> f32 { a + b }
/// let def = <add as UserFn>::definition();
/// assert_eq!(def.name, "add");
/// assert_eq!(def.params.len(), 2);
/// ```
#[derive(Debug)]
pub struct FnDef {
    /// The function's Rust name.
    pub name: &'static str,
    /// Parameters in declaration order (a 2D index is two parameters, row then column).
    pub params: &'static [Param],
    /// The return type.
    pub ret: Ty,
    /// The body.
    pub body: Block,
}

/// One parameter of a [`FnDef`].
#[derive(Debug)]
pub struct Param {
    /// The Rust name.
    pub name: &'static str,
    /// How the parameter is passed.
    pub kind: ParamKind,
    /// Its type; for arrays and windows the element type.
    pub ty: Ty,
}

/// How a parameter is passed (see the calling convention in [`crate::codegen`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// `#[index] i: usize`.
    Index,
    /// The row of `#[index] (row, col): (usize, usize)`.
    IndexRow,
    /// The column of `#[index] (row, col): (usize, usize)`.
    IndexCol,
    /// An element, by value.
    Elem,
    /// A `#[uniform]` parameter, by value.
    Uniform,
    /// `&[T]`.
    Array,
    /// `Window<T>`.
    Window,
    /// `Window2<T>`.
    Window2,
}

/// A block: statements and an optional tail expression (its value).
#[derive(Debug)]
pub struct Block {
    /// The statements.
    pub stmts: &'static [Stmt],
    /// The value of the block, if it has one.
    pub tail: Option<&'static Expr>,
}

/// A statement.
#[derive(Debug)]
pub enum Stmt {
    /// `let [mut] name[: ty] [= init];`
    Let {
        /// The local's name.
        name: &'static str,
        /// `let mut`.
        mutable: bool,
        /// The annotated type.
        ty: Option<Ty>,
        /// The initialiser.
        init: Option<&'static Expr>,
    },
    /// `place = value` or `place op= value`.
    Assign {
        /// A local, a field of a local, ...
        place: &'static Expr,
        /// `Some(op)` for compound assignment.
        op: Option<BinOp>,
        /// The assigned value.
        value: &'static Expr,
    },
    /// An expression evaluated for its effect (`if` without value, a call, a block).
    Expr(&'static Expr),
    /// `for var in start..end` (or `..=`).
    For {
        /// The loop variable.
        var: &'static str,
        /// Range start.
        start: &'static Expr,
        /// Range end.
        end: &'static Expr,
        /// `..=` instead of `..`.
        inclusive: bool,
        /// Loop body.
        body: Block,
    },
    /// `while cond { body }`.
    While {
        /// The condition.
        cond: &'static Expr,
        /// Loop body.
        body: Block,
    },
    /// `return [value]`.
    Return(Option<&'static Expr>),
    /// `break`.
    Break,
    /// `continue`.
    Continue,
}

/// An expression.
#[derive(Debug)]
pub enum Expr {
    /// An integer literal; without suffix its type is inferred.
    Int {
        /// The value (non-negative; `-1` is `Neg(1)`).
        value: u128,
        /// The suffix type, if any.
        suffix: Option<super::Prim>,
    },
    /// A float literal: its digits (no `_`, no suffix) and its suffix type, if any.
    Float {
        /// The literal's text without underscores and suffix.
        text: &'static str,
        /// The suffix type, if any.
        suffix: Option<super::Prim>,
    },
    /// `true` / `false`.
    Bool(bool),
    /// A local or parameter.
    Var(&'static str),
    /// An associated constant of a primitive: `f32::MAX`, `f64::consts::PI`, `i32::MIN`.
    Const {
        /// The primitive type.
        ty: super::Prim,
        /// The constant's name (`MAX`, `PI`, ...).
        name: &'static str,
    },
    /// A unary operation.
    Unary {
        /// The operator.
        op: UnOp,
        /// The operand.
        expr: &'static Expr,
    },
    /// A binary operation.
    Binary {
        /// The operator.
        op: BinOp,
        /// Left operand.
        lhs: &'static Expr,
        /// Right operand.
        rhs: &'static Expr,
    },
    /// `expr as ty`.
    Cast {
        /// The operand.
        expr: &'static Expr,
        /// The target type.
        ty: Ty,
    },
    /// A call to another user function.
    Call {
        /// The callee's definition.
        callee: fn() -> &'static FnDef,
        /// The arguments (a 2D index is passed as one tuple argument in Rust, as two here).
        args: &'static [Expr],
    },
    /// A math method: `x.sqrt()` or `f32::sqrt(x)` (receiver first in `args`).
    Math {
        /// Which function.
        func: MathFn,
        /// The type named in `f32::sqrt(x)`, if written that way.
        ty: Option<super::Prim>,
        /// Receiver, then the other arguments.
        args: &'static [Expr],
    },
    /// `expr.field`.
    Field {
        /// The struct value.
        expr: &'static Expr,
        /// The field's name.
        name: &'static str,
    },
    /// `base[index]`: an array element or a 1D window offset.
    Index {
        /// The array or window.
        base: &'static Expr,
        /// The index or offset.
        index: &'static Expr,
    },
    /// `w[(di, dj)]`: a 2D window offset.
    Index2 {
        /// The window.
        base: &'static Expr,
        /// Row offset.
        row: &'static Expr,
        /// Column offset.
        col: &'static Expr,
    },
    /// `Name { field: value, .. }`.
    Struct {
        /// The struct type.
        ty: Ty,
        /// Field initialisers in source order.
        fields: &'static [FieldInit],
    },
    /// `if cond { .. } else { .. }` (as an expression or statement).
    If {
        /// The condition.
        cond: &'static Expr,
        /// Then branch.
        then: Block,
        /// Else branch (an `else if` is a block whose tail is an `If`).
        els: Option<Block>,
    },
    /// `{ stmts; tail }`.
    Block(Block),
}

/// `name: value` in a struct literal.
#[derive(Debug)]
pub struct FieldInit {
    /// Field name.
    pub name: &'static str,
    /// Its value.
    pub value: Expr,
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    /// `-x`.
    Neg,
    /// `!x` (logical for `bool`, bitwise for integers).
    Not,
}

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    And,
    Or,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// The math methods a user function may call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum MathFn {
    Abs,
    Sqrt,
    Powf,
    Powi,
    Exp,
    Ln,
    Log2,
    Log10,
    Sin,
    Cos,
    Tan,
    Floor,
    Ceil,
    Round,
    RoundTiesEven,
    Min,
    Max,
    MulAdd,
}

impl MathFn {
    /// The method's Rust name.
    pub fn name(self) -> &'static str {
        match self {
            MathFn::Abs => "abs",
            MathFn::Sqrt => "sqrt",
            MathFn::Powf => "powf",
            MathFn::Powi => "powi",
            MathFn::Exp => "exp",
            MathFn::Ln => "ln",
            MathFn::Log2 => "log2",
            MathFn::Log10 => "log10",
            MathFn::Sin => "sin",
            MathFn::Cos => "cos",
            MathFn::Tan => "tan",
            MathFn::Floor => "floor",
            MathFn::Ceil => "ceil",
            MathFn::Round => "round",
            MathFn::RoundTiesEven => "round_ties_even",
            MathFn::Min => "min",
            MathFn::Max => "max",
            MathFn::MulAdd => "mul_add",
        }
    }

    /// Number of arguments including the receiver.
    pub fn arity(self) -> usize {
        match self {
            MathFn::Powf | MathFn::Powi | MathFn::Min | MathFn::Max => 2,
            MathFn::MulAdd => 3,
            _ => 1,
        }
    }
}
