//! The typed tree that `#[userfn]` emits for each function body ([`FnDef`]).
//!
//! Every node is `'static` data built in a `static` by the macro, so a definition costs
//! nothing at run time until a GPU backend translates it. Types that only the library knows
//! (struct layouts, signatures of called functions) are referenced, not copied: a struct as
//! its [`Ty`] constant, a called function as `fn() -> &'static FnDef`.
//!
//! The tree is deliberately close to the Rust source: literals keep their text and suffix,
//! unsuffixed literals have no type yet, locals have an optional annotation. Types are
//! inferred (by the crate-private `typeck`) when the tree is translated.

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
#[non_exhaustive]
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
    /// `Window3<T>`: `w[(di, dj, dk)]` is an [`Expr::Index3`].
    Window3,
    /// `Mat<T>`, a read-only matrix (a container argument): `m[(r, c)]` is an
    /// [`Expr::Index2`], `m.rows()` / `m.cols()` an [`Expr::Field`] named `rows` / `cols`.
    Mat,
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
#[non_exhaustive]
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
    /// `loop { body }` (left with `break` or `return`).
    Loop {
        /// Loop body.
        body: Block,
    },
    /// `let (a, mut b, _) = init;`: destructuring a tuple (a called function's result, a
    /// tuple local or a tuple expression).
    LetTuple {
        /// The names bound, in order (`"_"` binds nothing), and whether each is `mut`.
        names: &'static [(&'static str, bool)],
        /// The tuple.
        init: &'static Expr,
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
#[non_exhaustive]
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
    /// An associated constant of a primitive: `f32::MAX`, `f64::consts::PI`, `i32::MIN`,
    /// `u8::BITS` (a `u32`).
    Const {
        /// The primitive type.
        ty: super::Prim,
        /// The constant's name (`MAX`, `PI`, ...).
        name: &'static str,
    },
    /// A named constant outside the function: a module-level `const` (or an associated
    /// constant of a user type) of any device type, referenced by path (`K`,
    /// `filters::GAUSS`). Its value is read when the function is translated.
    Extern {
        /// The path as written (for messages).
        name: &'static str,
        /// The value and its type.
        value: fn() -> ConstValue,
    },
    /// `[a, b, c]`.
    Array(&'static [Expr]),
    /// `[value; len]`.
    Repeat {
        /// The element (evaluated once).
        value: &'static Expr,
        /// The length (a constant).
        len: usize,
    },
    /// `(a, b, ..)`, the value of a function returning a tuple.
    Tuple(&'static [Expr]),
    /// `x.len()` of a local array or a `&[T]` parameter.
    Len(&'static Expr),
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
    /// `expr.field` (or `expr.0` of a tuple).
    Field {
        /// The struct value.
        expr: &'static Expr,
        /// The field's name (`"0"`, `"1"`, .. for a tuple element).
        name: &'static str,
    },
    /// `base[index]`: an element of a `&[T]` parameter or a local array (any expression of
    /// array type), or a 1D window offset.
    Index {
        /// The array or window.
        base: &'static Expr,
        /// The index or offset.
        index: &'static Expr,
    },
    /// `w[(di, dj, dk)]`: a 3D window offset.
    Index3 {
        /// The window.
        base: &'static Expr,
        /// The offsets along the slowest, middle and fastest axis.
        offsets: [&'static Expr; 3],
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
#[non_exhaustive]
pub enum UnOp {
    /// `-x`.
    Neg,
    /// `!x` (logical for `bool`, bitwise for integers).
    Not,
}

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
#[non_exhaustive]
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

/// The value of an [`Expr::Extern`] constant: its type and its bytes in Rust's layout.
#[derive(Clone, Debug)]
pub struct ConstValue {
    /// The constant's type.
    pub ty: Ty,
    /// Its bytes (native endianness; device types have no padding).
    pub bytes: Vec<u8>,
}

impl ConstValue {
    /// Captures `v` (called by `#[userfn]`'s expansion).
    ///
    /// ```
    /// let c = skel::plumbing::codegen::ConstValue::of(&[1u8, 2, 3]);
    /// assert_eq!(c.bytes, [1, 2, 3]);
    /// ```
    pub fn of<T: crate::DeviceType>(v: &T) -> ConstValue {
        ConstValue {
            ty: T::TY,
            bytes: crate::containers::host::as_bytes(std::slice::from_ref(v)).to_vec(),
        }
    }
}

macro_rules! math_fns {
    ($($v:ident $name:literal $arity:literal $class:ident,)*) => {
        /// The math methods a user function may call.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[allow(missing_docs)]
        #[non_exhaustive]
        pub enum MathFn {
            $($v,)*
        }

        impl MathFn {
            /// Every method, for the macro's and the messages' lists.
            pub const ALL: &'static [MathFn] = &[$(MathFn::$v,)*];

            /// The method's Rust name.
            pub fn name(self) -> &'static str {
                match self {
                    $(MathFn::$v => $name,)*
                }
            }

            /// Number of arguments including the receiver.
            pub fn arity(self) -> usize {
                match self {
                    $(MathFn::$v => $arity,)*
                }
            }

            /// Whether it is defined for floats and for integers.
            pub fn classes(self) -> (bool, bool) {
                match self {
                    $(MathFn::$v => math_fns!(@class $class),)*
                }
            }
        }
    };
    (@class float) => { (true, false) };
    (@class int) => { (false, true) };
    (@class both) => { (true, true) };
}

math_fns! {
    Abs "abs" 1 both,
    Sqrt "sqrt" 1 float,
    Cbrt "cbrt" 1 float,
    Powf "powf" 2 float,
    Powi "powi" 2 float,
    Exp "exp" 1 float,
    Exp2 "exp2" 1 float,
    Ln "ln" 1 float,
    Log2 "log2" 1 float,
    Log10 "log10" 1 float,
    Sin "sin" 1 float,
    Cos "cos" 1 float,
    Tan "tan" 1 float,
    Asin "asin" 1 float,
    Acos "acos" 1 float,
    Atan "atan" 1 float,
    Atan2 "atan2" 2 float,
    Sinh "sinh" 1 float,
    Cosh "cosh" 1 float,
    Tanh "tanh" 1 float,
    Hypot "hypot" 2 float,
    Floor "floor" 1 float,
    Ceil "ceil" 1 float,
    Round "round" 1 float,
    RoundTiesEven "round_ties_even" 1 float,
    Trunc "trunc" 1 float,
    Fract "fract" 1 float,
    Min "min" 2 both,
    Max "max" 2 both,
    Clamp "clamp" 3 both,
    MulAdd "mul_add" 3 float,
    Signum "signum" 1 float,
    Copysign "copysign" 2 float,
    IsNan "is_nan" 1 float,
    IsFinite "is_finite" 1 float,
    Pow "pow" 2 int,
    WrappingAdd "wrapping_add" 2 int,
    WrappingSub "wrapping_sub" 2 int,
    WrappingMul "wrapping_mul" 2 int,
    RotateLeft "rotate_left" 2 int,
    RotateRight "rotate_right" 2 int,
    CountOnes "count_ones" 1 int,
    LeadingZeros "leading_zeros" 1 int,
    TrailingZeros "trailing_zeros" 1 int,
}

/// A statement or an expression, as [`visit_block`] meets them.
pub(crate) enum Node<'a> {
    Stmt(&'a Stmt),
    Expr(&'a Expr),
}

/// Calls `f` on every statement and expression of `b`, outermost first.
pub(crate) fn visit_block(b: &Block, f: &mut dyn FnMut(Node<'static>)) {
    for s in b.stmts {
        f(Node::Stmt(s));
        match s {
            Stmt::Let { init, .. } => {
                if let Some(e) = init {
                    visit_expr(e, f);
                }
            }
            Stmt::Assign { place, value, .. } => {
                visit_expr(place, f);
                visit_expr(value, f);
            }
            Stmt::Expr(e) | Stmt::Return(Some(e)) => visit_expr(e, f),
            Stmt::For {
                start, end, body, ..
            } => {
                visit_expr(start, f);
                visit_expr(end, f);
                visit_block(body, f);
            }
            Stmt::While { cond, body } => {
                visit_expr(cond, f);
                visit_block(body, f);
            }
            Stmt::Loop { body } => visit_block(body, f),
            Stmt::LetTuple { init, .. } => visit_expr(init, f),
            Stmt::Return(None) | Stmt::Break | Stmt::Continue => {}
        }
    }
    if let Some(t) = b.tail {
        visit_expr(t, f);
    }
}

/// Calls `f` on `e` and everything inside it, outermost first.
pub(crate) fn visit_expr(e: &'static Expr, f: &mut dyn FnMut(Node<'static>)) {
    f(Node::Expr(e));
    match e {
        Expr::Int { .. }
        | Expr::Float { .. }
        | Expr::Bool(_)
        | Expr::Var(_)
        | Expr::Const { .. }
        | Expr::Extern { .. } => {}
        Expr::Unary { expr, .. }
        | Expr::Cast { expr, .. }
        | Expr::Field { expr, .. }
        | Expr::Len(expr)
        | Expr::Repeat { value: expr, .. } => visit_expr(expr, f),
        Expr::Array(items) | Expr::Tuple(items) => items.iter().for_each(|a| visit_expr(a, f)),
        Expr::Binary { lhs, rhs, .. } => {
            visit_expr(lhs, f);
            visit_expr(rhs, f);
        }
        Expr::Call { args, .. } | Expr::Math { args, .. } => {
            args.iter().for_each(|a| visit_expr(a, f))
        }
        Expr::Index { base, index } => {
            visit_expr(base, f);
            visit_expr(index, f);
        }
        Expr::Index2 { base, row, col } => {
            visit_expr(base, f);
            visit_expr(row, f);
            visit_expr(col, f);
        }
        Expr::Index3 { base, offsets } => {
            visit_expr(base, f);
            offsets.iter().for_each(|o| visit_expr(o, f));
        }
        Expr::Struct { fields, .. } => fields.iter().for_each(|x| visit_expr(&x.value, f)),
        Expr::If { cond, then, els } => {
            visit_expr(cond, f);
            visit_block(then, f);
            if let Some(b) = els {
                visit_block(b, f);
            }
        }
        Expr::Block(b) => visit_block(b, f),
    }
}
